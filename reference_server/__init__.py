"""The reference serving process: a small real PyTorch LLM engine with pluggable batching.

Engine side: `scheduling/` (pure: `sequence`, `sampling`, `block_manager`, `postprocess`,
`strategies/` with the strategy registry), `engine/` (torch: config, model, model_runner, engine),
`runtime/`, `bench/`. Serving side: `cli`, `api/`.
"""
