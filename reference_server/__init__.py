"""The reference serving process: a small real PyTorch LLM engine with pluggable batching.

Engine side (issue 2): `config`, `tokenizer`, `sampling`, `model`, `checkpoint`, `sequence`,
`block_manager`, `schedulers/`, `model_runner`, `engine`, `bench`. Serving side: `cli`, `api/`.
"""
