"""Fit the roofline's efficiencies and fixed costs to published points (scipy.optimize.least_squares).

Residual of a point: w x log(predicted / measured), w = 1 / sqrt(points of its source) (normalized), so
no one publication outweighs the rest. Each efficiency is a logistic of additive effects, so it lies in
(0, 1) and unseen combinations fall back to what is shared:
    efficiency(family, dtype class) = sigmoid(mu + family effect + dtype-class effect)
for weight bandwidth, prefill compute and decode compute; KV bandwidth has mu + family effect. Effects
carry a ridge penalty (1 x effect in the residuals), which keeps a family or dtype class with few points
near the pooled value: few effective parameters per family. Fixed costs are log-parameterized: decode
overhead per step, cost per sequence per step, prefill overhead, all-reduce latency per interconnect kind
(ridge toward 10 us). The all-reduce link efficiency is fixed at 0.8 (NCCL-class bus bandwidth; the
published TP points are latency-dominated and do not pin it). Engine factors, where a form has them:
grouped-query KV amplification per engine (``Efficiencies.gqa_kv_amplification``, ridge toward 0.007) and,
to test it, a plain time factor per engine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from scipy import optimize

from calculators.roofline_fit.dataset import PublishedPoint
from calculators.roofline_fit.point_model import predicted_s
from calculators.efficiency import ENGINES, Efficiencies, dtype_class
from engine_core.gpus import get_gpu

EFFICIENCIES = ("weight_bandwidth", "prefill_compute", "decode_compute")
# TensorRT-LLM's grouped-query attention kernels changed in v0.7 ("up to 2.4x improvement on Llama-70B over
# v0.5", docs/source/blogs/Falcon180B-H200.md): the older releases get a GQA factor of their own
LEGACY_TRTLLM = "tensorrt-llm<0.7"
GQA_KEYS = (*ENGINES, LEGACY_TRTLLM)
DTYPE_CLASSES = ("16bit", "fp8", "int8", "int4")
LINK_EFFICIENCY = 0.8
ALLREDUCE_PRIOR_S = 10e-6
RIDGE = 1.0
ALLREDUCE_RIDGE = 0.5
GQA_PRIOR, GQA_RIDGE = -5.0, 0.1


@dataclass(frozen=True)
class ModelForm:
    """Which terms a fit has (the bench compares forms)."""

    name: str
    tp_comm: bool = True
    overheads: bool = True
    per_sequence: bool = True
    kv_efficiency: bool = True
    engine_gqa: bool = True
    engine_time_factor: bool = False


FINAL = ModelForm("roofline v2: TP all-reduces, fixed + per-sequence costs, KV bandwidth, engine GQA factor")
FORMS = (
    ModelForm("A: efficiencies only (no overhead, no TP term)", tp_comm=False, overheads=False, per_sequence=False,
              kv_efficiency=False, engine_gqa=False),
    ModelForm("B: A + TP all-reduces + fixed overheads", per_sequence=False, kv_efficiency=False, engine_gqa=False),
    ModelForm("C: B + per-sequence cost + KV bandwidth", engine_gqa=False),
    FINAL,
    replace(FINAL, name="E: final + an engine time factor", engine_time_factor=True),
)


def _sigmoid(x: float) -> float:
    return float(1 / (1 + np.exp(-x)))


def gqa_key(point: PublishedPoint) -> str:
    """Whose GQA factor a point's prediction uses: its engine, or the TensorRT-LLM releases before 0.7."""
    if point.engine == "tensorrt-llm" and point.engine_version.startswith(("0.5", "0.6")):
        return LEGACY_TRTLLM
    return point.engine


class ProfileModel:
    """The parameter vector of one form over the families and engines of some points."""

    def __init__(self, form: ModelForm, families: Sequence[str]):
        self.form, self.families = form, tuple(sorted(families))
        names = []
        for eff in EFFICIENCIES:
            names += [f"{eff}:mu"] + [f"{eff}:family:{f}" for f in self.families]
            names += [f"{eff}:dtype:{d}" for d in DTYPE_CLASSES]
        if form.kv_efficiency:
            names += ["kv_bandwidth:mu"] + [f"kv_bandwidth:family:{f}" for f in self.families]
        if form.overheads:
            names += ["decode_overhead_s", "prefill_overhead_s"]
        if form.per_sequence:
            names += ["per_sequence_s"]
        if form.tp_comm:
            names += ["allreduce:nvlink", "allreduce:pcie"]
        if form.engine_gqa:
            names += [f"gqa:{e}" for e in GQA_KEYS]
        if form.engine_time_factor:
            names += [f"time:{e}" for e in ENGINES]
        self.names = tuple(names)
        self.index = {n: i for i, n in enumerate(names)}

    def start(self) -> np.ndarray:
        x = np.zeros(len(self.names))
        defaults = {"weight_bandwidth:mu": 1.0, "prefill_compute:mu": 0.0, "decode_compute:mu": 0.0,
                    "kv_bandwidth:mu": 1.0, "decode_overhead_s": np.log(2e-4), "prefill_overhead_s": np.log(3e-3),
                    "per_sequence_s": np.log(1e-5), "allreduce:nvlink": np.log(ALLREDUCE_PRIOR_S),
                    "allreduce:pcie": np.log(ALLREDUCE_PRIOR_S)}
        for name, value in defaults.items():
            if name in self.index:
                x[self.index[name]] = value
        for engine in GQA_KEYS:
            if f"gqa:{engine}" in self.index:
                x[self.index[f"gqa:{engine}"]] = GQA_PRIOR
        return x

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low, high = np.full(len(self.names), -10.0), np.full(len(self.names), 10.0)
        for name, i in self.index.items():
            if name.endswith("_s") or name.startswith("allreduce:"):
                low[i], high[i] = -30.0, 0.0
        return low, high

    def _get(self, x: np.ndarray, name: str) -> float:
        i = self.index.get(name)
        return 0.0 if i is None else float(x[i])

    def _logit(self, x: np.ndarray, eff: str, family: str | None, dclass: str | None) -> float:
        return (self._get(x, f"{eff}:mu") + self._get(x, f"{eff}:family:{family}")
                + self._get(x, f"{eff}:dtype:{dclass}"))

    def efficiencies(self, x: np.ndarray, family: str | None, dclass: str | None, interconnect: str | None,
                     engine: str | None = None) -> Efficiencies:
        """The fitted efficiencies of a family and dtype class (None: the pooled value)."""
        weight = _sigmoid(self._logit(x, "weight_bandwidth", family, dclass))
        kv = (_sigmoid(self._get(x, "kv_bandwidth:mu") + self._get(x, f"kv_bandwidth:family:{family}"))
              if self.form.kv_efficiency else weight)
        exp = lambda name: float(np.exp(self._get(x, name))) if name in self.index else 0.0  # noqa: E731
        latency = exp("allreduce:pcie" if interconnect == "pcie" else "allreduce:nvlink")
        gqa = _sigmoid(self._get(x, f"gqa:{engine}")) if engine is not None and self.form.engine_gqa else 0.0
        return Efficiencies(
            weight_bandwidth=weight, kv_bandwidth=kv,
            prefill_compute=_sigmoid(self._logit(x, "prefill_compute", family, dclass)),
            decode_compute=_sigmoid(self._logit(x, "decode_compute", family, dclass)),
            decode_overhead_s=exp("decode_overhead_s"), per_sequence_s=exp("per_sequence_s"),
            prefill_overhead_s=exp("prefill_overhead_s"), allreduce_latency_s=latency,
            link_efficiency=LINK_EFFICIENCY if self.form.tp_comm else 1.0, gqa_kv_amplification=gqa,
            tp_comm_measured=not self.form.tp_comm)

    @staticmethod
    def efficiency_key(point: PublishedPoint) -> tuple[str, str, str, str]:
        """(family, dtype class, interconnect, GQA key): the arguments of the point's ``efficiencies``."""
        gpu = get_gpu(point.gpu)
        return gpu.family, dtype_class(point.dtype), gpu.interconnect, gqa_key(point)

    def predict(self, x: np.ndarray, point: PublishedPoint, eff: Efficiencies | None = None) -> float:
        """``eff``: the point's efficiencies under ``x``, when the caller has them (``fit`` shares them)."""
        if eff is None:
            eff = self.efficiencies(x, *self.efficiency_key(point))
        factor = np.exp(self._get(x, f"time:{point.engine}")) if self.form.engine_time_factor else 1.0
        return predicted_s(point, eff) * factor

    def penalties(self, x: np.ndarray) -> np.ndarray:
        out = []
        for name, i in self.index.items():
            if ":family:" in name or ":dtype:" in name or name.startswith("time:"):
                out.append(RIDGE * x[i])
            elif name.startswith("allreduce:"):
                out.append(ALLREDUCE_RIDGE * (x[i] - np.log(ALLREDUCE_PRIOR_S)))
            elif name.startswith("gqa:"):
                out.append(GQA_RIDGE * (x[i] - GQA_PRIOR))
        return np.array(out)


@dataclass(frozen=True)
class Fit:
    model: ProfileModel
    x: np.ndarray
    points: int

    def predict(self, point: PublishedPoint) -> float:
        return self.model.predict(self.x, point)

    def parameters(self) -> dict[str, float]:
        return {name: float(v) for name, v in zip(self.model.names, self.x)}


def fit(points: Sequence[PublishedPoint], form: ModelForm = FINAL, *, families: Sequence[str] | None = None,
        start: np.ndarray | None = None) -> Fit:
    """Least-squares fit of ``form`` to ``points`` (module docstring)."""
    if not points:
        raise ValueError("no points to fit")
    fams = families if families is not None else sorted({get_gpu(p.gpu).family for p in points})
    model = ProfileModel(form, fams)
    counts: dict[str, int] = {}
    for p in points:
        counts[p.source] = counts.get(p.source, 0) + 1
    weight = np.array([1 / np.sqrt(counts[p.source]) for p in points])
    weight /= weight.mean()
    measured = np.array([p.measured_s for p in points])

    # the efficiencies depend on a point only through its key: computed once per key and evaluation
    # (a handful of keys against hundreds of points, each least-squares step evaluating x once per parameter)
    keys = [model.efficiency_key(p) for p in points]

    def residuals(x: np.ndarray) -> np.ndarray:
        effs = {key: model.efficiencies(x, *key) for key in set(keys)}
        predicted = np.array([model.predict(x, p, effs[key]) for p, key in zip(points, keys)])
        return np.concatenate([weight * np.log(predicted / measured), model.penalties(x)])

    low, high = model.bounds()
    x0 = model.start() if start is None else np.clip(start, low, high)
    result = optimize.least_squares(residuals, x0, bounds=(low, high), x_scale=1.0, max_nfev=200)
    return Fit(model, result.x, len(points))


def leave_one_source_out(points: Sequence[PublishedPoint], form: ModelForm = FINAL) -> tuple[Fit, dict[str, float]]:
    """(fit on every complete point, relative error of each point): a complete point's error comes from
    the fit without its source; a partial point's from the full fit, which never saw it."""
    complete = [p for p in points if p.complete]
    families = sorted({get_gpu(p.gpu).family for p in complete})
    full = fit(complete, form, families=families)
    errors: dict[str, float] = {}
    for source in sorted({p.source for p in complete}):
        held = [p for p in complete if p.source == source]
        without = fit([p for p in complete if p.source != source], form, families=families, start=full.x)
        errors.update({p.id: without.predict(p) / p.measured_s - 1 for p in held})
    errors.update({p.id: full.predict(p) / p.measured_s - 1 for p in points if not p.complete})
    return full, errors
