"""A catalog GPU replica for the plan, sized as its engine would size it: the rule of `servecap serve
--emulate` and `calc simulate --gpu` (`calculators.gpu_engine`), with the catalog's assumed price."""

from __future__ import annotations

from calculators.gpu_engine import gpu_engine
from calculators.moe_layout import PLAIN, MoeLayout
from engine_core.gpus import get_gpu
from engine_core.models import resolve_model
from calculators.plan.fleet import ReplicaSpec
from calculators.sim.workload import SimServer


def gpu_replica(gpu_name: str, model: str, *, dtype: str = "bf16", tp: int = 1, engine: str = "vllm",
                engine_version: str | None = None, max_model_len: int | None = None,
                layout: MoeLayout = PLAIN) -> ReplicaSpec:
    """Continuous batching with the engine's default limits, the KV blocks left on that GPU, the fitted step
    model. `max_model_len` (default: the model's) as `servecap serve --max-model-len`: a replica whose KV
    cache cannot hold one request of it does not fit. An MoE `layout` (calculators.moe_layout): a replica of
    tp x dp GPUs, dp ranks' limits and caches."""
    gpu = get_gpu(gpu_name)
    sizing = gpu_engine(resolve_model(model), gpu, dtype=dtype, tp=tp, engine=engine, engine_version=engine_version,
                        max_model_len=max_model_len, layout=layout)
    server = SimServer.from_flags("continuous", num_kv_blocks=sizing.num_kv_blocks, block_size=sizing.block_size,
                                  **sizing.limit_flags())
    return ReplicaSpec(server, sizing.step_model, sizing.num_kv_blocks, gpus=layout.gpus(tp),
                       hourly_usd_per_gpu=gpu.hourly_usd,
                       describe=sizing.describe().removeprefix("emulated "), max_model_len=sizing.max_model_len)
