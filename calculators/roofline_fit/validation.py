"""Leave-one-source-out validation on the published points, its tables and the error bands it yields.

Each complete source is held out in turn: the model is fitted on the other sources and predicts the
held-out points; partial points are predicted by the fit on all complete points. From those errors:
- the targets: median |error| <= 15% for decode (steps, ITLs, decode-dominated static batches) and for
  prefill at prompts of 1k tokens or more;
- the error band of each (GPU family, dtype class): the 80th percentile of |error| over its decode
  points (one GPU and tensor parallel apart) and over its prefill points (long and short prompts apart),
  falling back to the family, then to every point, when fewer than ``MIN_BAND_POINTS`` points are behind it;
- the default efficiency profile: the full fit's efficiencies for every catalog family and dtype class,
  each with its bands.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from calculators.roofline_fit.dataset import PublishedPoint
from calculators.roofline_fit.fit_profile import DTYPE_CLASSES, FINAL, GQA_KEYS, GQA_PRIOR, LINK_EFFICIENCY, Fit, \
    ModelForm, leave_one_source_out
from calculators.roofline_fit.point_model import phase
from calculators.efficiency import LONG_PROMPT_TOKENS as LONG_PROMPT, ErrorBand, dtype_class
from calculators.efficiency_profile import EfficiencyProfile, ProfileEntry
from engine_core.gpus import _catalog as gpu_catalog, get_gpu

TARGET = 0.15
MIN_BAND_POINTS = 8
BAND_QUANTILE = 0.8


@dataclass(frozen=True)
class Validation:
    form: ModelForm
    fit: Fit
    points: tuple[PublishedPoint, ...]
    errors: dict[str, float]          # point id -> predicted / measured - 1
    phases: dict[str, str]            # point id -> decode | prefill | mixed

    def selected(self, *, complete: bool = True, phase_: str | None = None,
                 long_prompt: bool | None = None) -> list[PublishedPoint]:
        out = []
        for p in self.points:
            if p.complete != complete or (phase_ is not None and self.phases[p.id] != phase_):
                continue
            if long_prompt is not None and (p.input_tokens >= LONG_PROMPT) != long_prompt:
                continue
            out.append(p)
        return out

    def abs_errors(self, points: Sequence[PublishedPoint]) -> np.ndarray:
        return np.array([abs(self.errors[p.id]) for p in points])

    def median(self, points: Sequence[PublishedPoint]) -> float:
        return float(np.median(self.abs_errors(points))) if points else float("nan")

    def targets(self) -> dict[str, dict]:
        decode = self.selected(phase_="decode")
        prefill = self.selected(phase_="prefill", long_prompt=True)
        return {name: {"points": len(sel), "median_abs_error": self.median(sel), "target": TARGET,
                       "met": self.median(sel) <= TARGET}
                for name, sel in (("decode", decode), ("prefill_1k_plus", prefill))}


def validate(points: Sequence[PublishedPoint], form: ModelForm = FINAL) -> Validation:
    full, errors = leave_one_source_out(points, form)
    return Validation(form, full, tuple(points), errors, {p.id: phase(p) for p in points})


def table(validation: Validation, *, complete: bool = True) -> list[dict]:
    """One row per (GPU, dtype, TP, phase): points, sources, median and 80th-percentile |error|, signed median."""
    groups: dict[tuple, list[PublishedPoint]] = {}
    for p in validation.points:
        if p.complete == complete:
            groups.setdefault((p.gpu, p.dtype, p.tp, validation.phases[p.id]), []).append(p)
    rows = []
    for (gpu, dtype, tp, ph), pts in sorted(groups.items()):
        err = np.array([validation.errors[p.id] for p in pts])
        rows.append({"gpu": gpu, "dtype": dtype, "tp": tp, "phase": ph, "points": len(pts),
                     "sources": len({p.source for p in pts}), "median_abs_error": float(np.median(abs(err))),
                     "p80_abs_error": float(np.quantile(abs(err), BAND_QUANTILE)),
                     "median_error": float(np.median(err))})
    return rows


def _band(validation: Validation, points: list[PublishedPoint], scope: str) -> ErrorBand:
    err = validation.abs_errors(points)
    return ErrorBand(relative=round(float(np.quantile(err, BAND_QUANTILE)), 4),
                     median=round(float(np.median(err)), 4), points=len(points),
                     sources=len({p.source for p in points}), scope=scope)


def band_for(validation: Validation, family: str | None, dclass: str, which: str) -> ErrorBand:
    """The error band of ``which`` (decode | tp_decode | prefill | short_prefill) predictions on a family and
    dtype class; decode on one GPU and with tensor parallelism apart (the all-reduces add their own error)."""
    ph, long_prompt = {"decode": ("decode", None), "tp_decode": ("decode", None), "prefill": ("prefill", True),
                       "short_prefill": ("prefill", False)}[which]
    pool = validation.selected(phase_=ph, long_prompt=long_prompt)
    if which in ("decode", "tp_decode"):
        pool = [p for p in pool if (p.tp > 1) == (which == "tp_decode")]
    suffix = {"decode": ", one GPU", "tp_decode": ", tensor parallel", "prefill": ", prompts of 1k+ tokens",
              "short_prefill": ", prompts under 1k tokens"}[which]
    family_of = {p.id: get_gpu(p.gpu).family for p in pool}
    exact = [p for p in pool if family_of[p.id] == family and dtype_class(p.dtype) == dclass]
    if len(exact) >= MIN_BAND_POINTS:
        return _band(validation, exact, f"{family} {dclass}{suffix}")
    same_family = [p for p in pool if family_of[p.id] == family]
    if len(same_family) >= MIN_BAND_POINTS:
        return _band(validation, same_family, f"{family}, all dtypes{suffix}")
    return _band(validation, pool, f"all GPUs and dtypes{suffix}")


def _sig3(value: float) -> float:
    return float(f"{value:.3g}")


def _rounded(eff):
    """Four decimals for fractions, three significant digits for seconds: what the data can tell apart."""
    return replace(eff, **{k: round(getattr(eff, k), 4) for k in ("weight_bandwidth", "kv_bandwidth",
                                                                  "prefill_compute", "decode_compute")},
                   **{k: _sig3(getattr(eff, k)) for k in ("decode_overhead_s", "per_sequence_s", "prefill_overhead_s")})


def build_profile(validation: Validation) -> EfficiencyProfile:
    """The default profile: the full fit for every catalog family (and any GPU) x dtype class, with bands."""
    fit = validation.fit
    counts: dict[tuple, int] = {}
    for p in validation.selected():
        key = (get_gpu(p.gpu).family, dtype_class(p.dtype))
        counts[key] = counts.get(key, 0) + 1
    families = sorted({raw["family"] for raw in gpu_catalog().values() if raw["family"]})
    entries = []
    for family in [None, *families]:
        for dclass in DTYPE_CLASSES:
            eff = _rounded(fit.model.efficiencies(fit.x, family, dclass, interconnect=None))
            n = sum(c for (f, d), c in counts.items() if d == dclass and family in (None, f))
            where = f"{family} {dclass}" if family else f"all GPUs, {dclass}"
            source = (f"fitted on {n} published points ({where})" if n else
                      f"no published points on {where}: the fitted family and dtype effects combined")
            eff = replace(eff, allreduce_latency_s=0.0, link_efficiency=LINK_EFFICIENCY, source=source,
                          decode_band=band_for(validation, family, dclass, "decode"),
                          tp_decode_band=band_for(validation, family, dclass, "tp_decode"),
                          prefill_band=band_for(validation, family, dclass, "prefill"),
                          short_prefill_band=band_for(validation, family, dclass, "short_prefill"))
            entries.append(ProfileEntry(eff, family=family, dtype_class=dclass))
    params = fit.parameters()
    latency = {kind: _sig3(np.exp(params[f"allreduce:{kind}"])) for kind in ("nvlink", "pcie")}
    latency["infinity-fabric"] = latency["nvlink"]
    prior = 1 / (1 + np.exp(-GQA_PRIOR))
    gqa = {engine: round(float(1 / (1 + np.exp(-params[f"gqa:{engine}"]))), 4) for engine in GQA_KEYS
           if abs(1 / (1 + np.exp(-params.get(f"gqa:{engine}", GQA_PRIOR))) - prior) > 0.01}  # moved by its data
    targets = validation.targets()
    notes = (f"{validation.form.name}. Fitted on {len(validation.selected())} complete published points from "
             f"{len({p.source for p in validation.selected()})} sources (calculators/roofline_fit). "
             f"Leave-one-source-out median |error|: decode {targets['decode']['median_abs_error']:.1%}, "
             f"prefill of 1k+ token prompts {targets['prefill_1k_plus']['median_abs_error']:.1%}. "
             "Regenerate: python -m lab.calculators.gpu_validation --write")
    return EfficiencyProfile(name="fitted on published measurements", entries=tuple(entries),
                             allreduce_latency_s=latency, link_efficiency=LINK_EFFICIENCY,
                             engine_gqa_kv_amplification=gqa, notes=notes)
