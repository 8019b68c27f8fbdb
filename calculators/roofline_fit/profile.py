"""Fit an efficiency profile to a user's own measured engine steps, one fit per TP degree.

A measured step is a decode step (``batch`` sequences at mean ``context``), a prefill (``prefill_tokens``
of one prompt, ``batch`` 0) or a mixed step (both; predicted as their sum). The prediction is
``calculators.step_cost`` under ``Efficiencies`` with ``tp_comm_measured`` set: measured at this TP
degree, the all-reduces are inside the fitted overheads and efficiencies. Least squares on
log(predicted / measured) (scipy.optimize.least_squares); efficiencies are logistic (they stay in (0, 1)),
costs are milliseconds bounded at 0. A parameter the steps cannot see (one logistic unit or one
millisecond more changes no prediction by 0.1%) keeps its starting value: the default profile's for this
GPU and dtype. For one model, weight bandwidth and the fixed decode overhead trade off (both are a
constant per step): only their sum is pinned unless the steps span two model sizes or TP shards.
The fit's own residuals give each entry its band ("±4%, from 120 measured steps on h100-sxm fp8 tp=2").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from scipy import optimize

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import default_kv_dtype, parse_dtype, parse_kv_dtype
from calculators.efficiency import Efficiencies, ErrorBand, dtype_class
from calculators.efficiency_profile import EfficiencyProfile, ProfileEntry, default_profile
from engine_core.gpus import GpuSpec
from calculators.step_cost import decode_cost, prefill_cost

FRACTIONS = ("weight_bandwidth", "kv_bandwidth", "prefill_compute", "decode_compute")
COSTS = ("decode_overhead_s", "per_sequence_s", "prefill_overhead_s")
UNSEEN = 1e-3            # relative change per unit of a parameter below which the steps cannot see it
MS = 1e-3                # costs are fitted in milliseconds


@dataclass(frozen=True)
class MeasuredStep:
    step_s: float
    batch: int = 0
    context: float = 0.0
    prefill_tokens: int = 0
    tp: int = 1

    def __post_init__(self) -> None:
        if not self.step_s > 0 or not np.isfinite(self.step_s):
            raise ValueError(f"step_s must be a positive number, got {self.step_s!r}")
        for name in ("batch", "prefill_tokens", "tp"):
            value = getattr(self, name)
            least = 1 if name == "tp" else 0
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
                raise ValueError(f"{name} must be a {'positive' if name == 'tp' else 'non-negative'} integer, "
                                 f"got {value!r}")
        if not self.context >= 0:
            raise ValueError(f"context must be >= 0, got {self.context!r}")
        if not self.batch and not self.prefill_tokens:
            raise ValueError("a measured step needs batch_size > 0 (decode) or prefill_tokens > 0 (prefill)")


@dataclass(frozen=True)
class TpFit:
    tp: int
    efficiencies: Efficiencies
    rms_relative_error: float
    samples: int
    fitted: tuple[str, ...]        # the parameters the steps determined; the rest kept their start


def predict_step(arch: ModelArchitecture, gpu: GpuSpec, dtype: str, kv_dtype: str | None, step: MeasuredStep,
                 eff: Efficiencies) -> float:
    dt = parse_dtype(dtype)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(dt))
    decode = decode_cost(arch, gpu, dt, kv_dt, batch=step.batch, context=step.context, tp=step.tp,
                         eff=eff).total_s if step.batch else 0.0
    prefill = prefill_cost(arch, gpu, dt, kv_dt, prompt_tokens=step.prefill_tokens, tp=step.tp, eff=eff).total_s
    return decode + prefill


def _pack(eff: Efficiencies, names: Sequence[str]) -> np.ndarray:
    return np.array([np.log(getattr(eff, n) / (1 - getattr(eff, n) + 1e-12)) if n in FRACTIONS
                     else getattr(eff, n) / MS for n in names])


def _unpack(x: np.ndarray, names: Sequence[str], start: Efficiencies, tie_kv: bool) -> Efficiencies:
    values = {n: float(1 / (1 + np.exp(-v))) if n in FRACTIONS else float(max(v, 0.0) * MS)
              for n, v in zip(names, x)}
    if tie_kv and "weight_bandwidth" in values:
        values["kv_bandwidth"] = values["weight_bandwidth"]
    return replace(start, **values)


def fit_efficiencies(arch: ModelArchitecture, gpu: GpuSpec, steps: Sequence[MeasuredStep], *, start: Efficiencies,
                     dtype: str = "bf16", kv_dtype: str | None = None, free: Sequence[str] = FRACTIONS + COSTS,
                     tie_kv: bool = False) -> TpFit:
    """Least squares of ``free`` (module docstring) over steps of one TP degree, starting from ``start``."""
    if len(steps) < 3:
        raise ValueError(f"need at least 3 measured steps to fit, got {len(steps)}")
    tps = {s.tp for s in steps}
    if len(tps) != 1:
        raise ValueError(f"fit one TP degree at a time, got {sorted(tps)}")
    start = replace(start, tp_comm_measured=True, decode_band=None, tp_decode_band=None, prefill_band=None,
                    short_prefill_band=None)
    names = [n for n in free if not (tie_kv and n == "kv_bandwidth")]
    measured = np.array([s.step_s for s in steps])

    def residuals(x: np.ndarray, names_: Sequence[str]) -> np.ndarray:
        eff = _unpack(x, names_, start, tie_kv)
        return np.log(np.array([predict_step(arch, gpu, dtype, kv_dtype, s, eff) for s in steps]) / measured)

    base = residuals(_pack(start, names), names)
    seen = []
    for i, name in enumerate(names):
        nudged = _pack(start, names)
        nudged[i] += 1.0
        if np.max(np.abs(residuals(nudged, names) - base)) >= UNSEEN:
            seen.append(name)
    if not seen:
        return TpFit(steps[0].tp, start, float(np.sqrt(np.mean(base ** 2))), len(steps), ())
    low = np.array([-12.0 if n in FRACTIONS else 0.0 for n in seen])
    high = np.array([12.0 if n in FRACTIONS else float(measured.max()) / MS for n in seen])
    result = optimize.least_squares(residuals, np.clip(_pack(start, seen), low, high), args=(seen,),
                                    bounds=(low, high))
    eff = _unpack(result.x, seen, start, tie_kv)
    return TpFit(steps[0].tp, eff, float(np.sqrt(np.mean(result.fun ** 2))), len(steps), tuple(seen))


def calibrate_profile(arch: ModelArchitecture, gpu: GpuSpec, steps: Sequence[MeasuredStep], *, dtype: str = "bf16",
                      kv_dtype: str | None = None, engine: str | None = None,
                      start: EfficiencyProfile | None = None) -> tuple[EfficiencyProfile, list[TpFit]]:
    """A profile with one entry per TP degree in ``steps`` (for this GPU and dtype class), and the fits."""
    fits, entries = [], []
    dclass = dtype_class(dtype)
    for tp in sorted({s.tp for s in steps}):
        group = [s for s in steps if s.tp == tp]
        begin = (start or default_profile()).resolve(gpu, dtype, tp, engine)
        tp_fit = fit_efficiencies(arch, gpu, group, start=begin, dtype=dtype, kv_dtype=kv_dtype)
        errors = np.abs([predict_step(arch, gpu, dtype, kv_dtype, s, tp_fit.efficiencies) / s.step_s - 1
                         for s in group])
        band = ErrorBand(relative=float(np.quantile(errors, 0.8)), median=float(np.median(errors)),
                         points=len(group), sources=1, scope=f"{gpu.name} {dclass} tp={tp}", basis="measured steps")
        fitted = ", ".join(tp_fit.fitted) or "nothing (every parameter kept its default)"
        eff = replace(tp_fit.efficiencies, decode_band=band, tp_decode_band=band, prefill_band=band,
                      short_prefill_band=band,
                      source=f"fitted on {len(group)} measured steps of {arch.name} on {gpu.name} {dclass} "
                             f"tp={tp} ({fitted})")
        fits.append(replace(tp_fit, efficiencies=eff))
        entries.append(ProfileEntry(eff, gpu=gpu.name, dtype_class=dclass, tp=tp))
    if not entries:
        raise ValueError("no measured steps")
    return EfficiencyProfile(name=f"{arch.name} on {gpu.name} {dclass}, measured", entries=tuple(entries),
                             notes="servecap calc calibrate --roofline: one entry per TP degree measured; "
                                   "communication is inside each entry's numbers."), fits
