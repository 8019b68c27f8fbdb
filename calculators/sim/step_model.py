"""The engine step-time model the simulator runs on.

    step_s = batch_s(sequences)
             + per_prefill_token_s x prompt tokens processed this step
             + per_context_token_s x context tokens attended this step
    batch_s(b) = base_s + per_seq_s x b, or, where given, ``batch_table[b - 1]`` (a measured cost
                 per batch size: a CPU's step is not linear in small batches), continued past
                 the table's end with per_seq_s per sequence

``jitter`` (optional) is the measured spread around that mean: factors measured / modelled step
time, from which the simulator draws one per step (a shared CPU or a throttling GPU is not
deterministic; p50 TTFT sees single steps, TPOT averages many, so both need the spread).
With ``jitter_block`` > 1 the factors are the residuals in the order they were measured and the
simulator draws runs of that many consecutive ones (a block bootstrap): slow steps come in
bursts (another process holding the core, a GC pause), and a burst inside one request's decode
moves its TPOT, which independent draws would average away.

``slow_paths`` (optional) is the slow part of that spread, on the wall clock: measured paths of
the machine's speed, each a factor per ``slow_bin_s`` seconds in the order measured (a VM's
core can run 1.5-2x slower for seconds at a time; steps cut into runs of 64 and shuffled lose
that, and a TTFT that waits behind a dozen requests, a sum over hundreds of steps, loses its
tail). The simulator's clock replays them, drawn whole and end to end, each step taking the
factor of the moment it starts; ``jitter`` then holds the fast part only (each step's factor
over its bin's).

``warm_up`` (optional) is a factor for each of the first steps after the engine could run nothing
(``warm_up[k]`` for the k-th, 0 the first; ``calculators.sim.warm_up``): a woken engine's first steps
run slower, and a closed loop at one user meets that at every prefill.

Fit it to measured steps with ``calculators.sim.calibrate.fit_step_model``, or derive it for a GPU
with ``from_roofline`` (memory-bound decode: the weights are read once per step, each sequence
adds its KV read; prefill tokens cost their matmul FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import default_kv_dtype, parse_dtype, parse_kv_dtype
from calculators.efficiency import Efficiencies
from calculators.efficiency_profile import EfficiencyProfile
from engine_core.gpus import GpuSpec
from calculators.moe_layout import PLAIN, MoeLayout

MOE_TABLE_BATCH = 1024   # an MoE step's batch table, when the engine's limit is not given


def _positive_floats(values, error: str) -> tuple[float, ...]:
    """`values` as a tuple of floats; ValueError(`error`) unless every one is a positive number. One
    pass over an array: a calibrated model carries 65,536 jitter factors, checked again at every `replace`."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError):   # ragged
        raise ValueError(error) from None
    if array.ndim != 1 or array.dtype.kind not in "biuf" or not (array > 0).all():
        raise ValueError(error)
    return tuple(array.astype(float).tolist())


@dataclass(frozen=True)
class StepTimeModel:
    base_s: float
    per_seq_s: float = 0.0
    per_prefill_token_s: float = 0.0
    per_context_token_s: float = 0.0
    jitter: tuple[float, ...] = ()
    jitter_block: int = 1
    batch_table: tuple[float, ...] = ()
    slow_paths: tuple[tuple[float, ...], ...] = ()
    slow_bin_s: float = 0.0
    warm_up: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if any(not isinstance(f, (int, float)) or not f > 0 for f in self.warm_up):
            raise ValueError("warm_up factors must be positive numbers")
        object.__setattr__(self, "warm_up", tuple(float(f) for f in self.warm_up))
        paths = tuple(tuple(path) for path in self.slow_paths)
        if any(not path or any(not isinstance(f, (int, float)) or not f > 0 for f in path) for path in paths):
            raise ValueError("slow_paths must be non-empty sequences of positive factors")
        object.__setattr__(self, "slow_paths", tuple(tuple(float(f) for f in path) for path in paths))
        if paths and not (isinstance(self.slow_bin_s, (int, float)) and self.slow_bin_s > 0):
            raise ValueError(f"slow_bin_s must be positive seconds with slow_paths, got {self.slow_bin_s!r}")
        if any(not isinstance(v, (int, float)) or not v > 0 for v in self.batch_table):
            raise ValueError("batch_table entries must be positive seconds")
        object.__setattr__(self, "batch_table", tuple(float(v) for v in self.batch_table))
        object.__setattr__(self, "jitter", _positive_floats(self.jitter, "jitter factors must be positive numbers"))
        if isinstance(self.jitter_block, bool) or not isinstance(self.jitter_block, int) or self.jitter_block < 1:
            raise ValueError(f"jitter_block must be a positive integer, got {self.jitter_block!r}")
        for name in ("base_s", "per_seq_s", "per_prefill_token_s", "per_context_token_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if self.base_s + self.per_seq_s + self.per_prefill_token_s <= 0:
            raise ValueError("base_s, per_seq_s and per_prefill_token_s cannot all be zero")

    def scaled(self, factor: float) -> "StepTimeModel":
        """The same model on a machine `factor` times slower (every cost, not the noise's shape)."""
        if not factor > 0:
            raise ValueError(f"factor must be positive, got {factor!r}")
        return replace(self, base_s=self.base_s * factor, per_seq_s=self.per_seq_s * factor,
                       per_prefill_token_s=self.per_prefill_token_s * factor,
                       per_context_token_s=self.per_context_token_s * factor,
                       batch_table=tuple(t * factor for t in self.batch_table))

    def batch_s(self, sequences: int) -> float:
        table = self.batch_table
        if not table:
            return self.base_s + self.per_seq_s * sequences
        if sequences <= len(table):
            return table[sequences - 1]
        return table[-1] + self.per_seq_s * (sequences - len(table))

    def step_s(self, sequences: int, prefill_tokens: int = 0, context_tokens: int = 0) -> float:
        return (self.batch_s(sequences) + self.per_prefill_token_s * prefill_tokens
                + self.per_context_token_s * context_tokens)

    def steps_s(self, sequences: np.ndarray, prefill_tokens: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        """``step_s`` of many steps at once: [S] each -> [S] seconds."""
        b = np.asarray(sequences, dtype=np.int64)
        if self.batch_table:
            table = np.asarray(self.batch_table)
            inside = np.clip(b, 1, len(table)) - 1
            batch = np.where(b <= len(table), table[inside], table[-1] + self.per_seq_s * (b - len(table)))
        else:
            batch = self.base_s + self.per_seq_s * b
        return (batch + self.per_prefill_token_s * np.asarray(prefill_tokens, dtype=float)
                + self.per_context_token_s * np.asarray(context_tokens, dtype=float))


def step_model_from_roofline(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", tp: int = 1,
                             profile: EfficiencyProfile | None = None, engine: str | None = None,
                             efficiency: Efficiencies | None = None, kv_dtype: str | None = None,
                             layout: MoeLayout = PLAIN, max_batch: int = MOE_TABLE_BATCH) -> StepTimeModel:
    """A ``StepTimeModel`` from the roofline terms (see ``calculators.roofline``), under the efficiency
    profile (default: fitted on published points) or ``efficiency`` as given.

    base_s = decode step at batch 1, no context (weights read, overhead, all-reduces), less the per-sequence cost;
    per_seq_s = the profile's per-sequence cost;
    per_context_token_s = KV bytes of one token in `kv_dtype` (default: the weights' rule) / (bandwidth x KV
    efficiency), or the attention's FLOPs on it / (the KV format's peak x decode compute efficiency) where
    those take longer (MLA: its queries score and sum the latent of every token, about 17 MFLOP a token for
    DeepSeek-V3 against 35 KB read);
    per_prefill_token_s = prefill of 4096 tokens / 4096 (prefill is compute bound).
    An MoE model's step is not linear in its batch: each sequence more touches more experts (their weights
    read), and an expert-parallel layout's all-to-alls grow with the tokens. Its batch_table holds the
    decode step at each batch of 1..`max_batch` (no context), per_seq_s the last one's slope beyond it. With a
    ``layout`` (calculators.moe_layout) the batch is the replica's, spread over its dp ranks: a context
    token and a prefill token cost one rank's share.
    """
    from calculators.efficiency_profile import efficiencies_for  # local: roofline imports nothing from here
    from calculators.roofline import roofline
    from calculators.step_cost import attention_flops_per_context_token, decode_cost

    layout.check(arch, tp)
    eff = efficiencies_for(gpu, dtype, layout.gpus(tp), profile=profile, engine=engine, efficiency=efficiency)
    one = roofline(arch, gpu, dtype=dtype, kv_dtype=kv_dtype, batch=1, context=0, prompt_tokens=0, tp=tp,
                   efficiency=eff, layout=layout)
    long = roofline(arch, gpu, dtype=dtype, kv_dtype=kv_dtype, batch=1, context=4096, prompt_tokens=4096, tp=tp,
                    efficiency=eff, layout=layout)
    per_token_kv = long.kv_bytes_read / 4096 / (gpu.bandwidth_bytes_per_s * eff.kv_bandwidth)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(parse_dtype(dtype)))
    per_token_attention = (attention_flops_per_context_token(arch, tp) / layout.dp
                           / (gpu.peak_flops(kv_dt) * eff.decode_compute))
    per_token_kv = max(per_token_kv, per_token_attention)
    per_seq = eff.per_sequence_s / layout.dp
    model = StepTimeModel(base_s=one.decode_step_s - per_seq, per_seq_s=per_seq,
                          per_prefill_token_s=long.prefill_s / (4096 * layout.dp), per_context_token_s=per_token_kv)
    if not arch.is_moe:
        return model
    dt = parse_dtype(dtype)
    table = [decode_cost(arch, gpu, dt, kv_dt, batch=b, context=0, tp=tp, eff=eff, layout=layout).total_s
             for b in range(1, max_batch + 1)]
    return replace(model, batch_table=tuple(table), per_seq_s=max(table[-1] - table[-2], 0.0) if max_batch > 1
                   else per_seq)
