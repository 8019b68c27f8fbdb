"""The floor under the engine and the calculators: what both run or read.

- `scheduling/`: the pure engine core (sequences, block manager, batching strategies, step
  bookkeeping). The reference server's engine and the simulator run this same code, so they
  cannot disagree about admission, preemption or batching. No torch.
- `architecture`, `dtypes`, `hf_config`, `models`, `gpus` (and `catalog/`): model shapes, number
  formats and the GPU and model catalogs, which the engine sizes itself with and the calculators
  model.

Nothing here imports a package above it; no I/O beyond reading the packaged catalogs and a
local HF config.
"""
