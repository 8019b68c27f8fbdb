"""The reference serving process: a small real PyTorch LLM engine with pluggable batching.

Engine side: `engine/` (torch: config, model, model_runner, engine) over the pure core in
`engine_core.scheduling` (sequences, block manager, strategies), `runtime/`. Serving side:
`cli`, `api/`.
"""
