"""Fit the roofline to the published GPU measurements and print the leave-one-source-out validation.

    .venv/bin/python -m lab.calculators.gpu_validation            # tables (about 30 s on one core)
    .venv/bin/python -m lab.calculators.gpu_validation --forms    # also compare the model forms (~3 min)
    .venv/bin/python -m lab.calculators.gpu_validation --write    # regenerate roofline_fit/fitted_profile.json

The dataset is calculators/roofline_fit/published_points.csv (sources in sources.json). Targets: median
|error| at most 15% for decode and for prefill of 1k+ token prompts, each point predicted by a fit that
never saw its source. Also printed: the errors of the defaults this replaces (bandwidth 0.8, compute 0.5,
no overhead, no TP term) and the ideal roofline's lower-bound check.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np

from calculators.roofline_fit.dataset import load_points, load_sources
from calculators.roofline_fit.fit_profile import FINAL, FORMS
from calculators.roofline_fit.point_model import predicted_s
from calculators.roofline_fit.validation import Validation, build_profile, table, validate
from calculators.cli.output import print_json, print_rows
from calculators.sim.calibrate import PREVIOUS_DEFAULTS as BEFORE
from calculators.efficiency import IDEAL
from calculators.efficiency_profile import EfficiencyProfile

# the roofline before this fit: 80% of bandwidth, 50% of peak, no overhead and no TP term
PREVIOUS_DEFAULTS = replace(BEFORE, tp_comm_measured=True)


def _phase_medians(validation: Validation, errors: dict[str, float]) -> dict[str, float]:
    out = {}
    for name, sel in (("decode", validation.selected(phase_="decode")),
                      ("prefill_1k_plus", validation.selected(phase_="prefill", long_prompt=True)),
                      ("prefill_short", validation.selected(phase_="prefill", long_prompt=False)),
                      ("mixed", validation.selected(phase_="mixed")),
                      ("partial_points", [p for p in validation.points if not p.complete])):
        out[name] = float(np.median([abs(errors[p.id]) for p in sel])) if sel else float("nan")
    return out


def efficiency_rows(profile: EfficiencyProfile) -> list[dict]:
    """Entries fitted on points of their own family and dtype class; bands as ±p80 over (points)."""
    def short(band) -> str:
        pooled = not band.scope.startswith(("ampere ", "hopper ", "ada "))
        return f"±{band.relative:.0%} ({band.points}{'*' if pooled else ''})"

    rows = []
    for entry in profile.entries:
        e = entry.efficiencies
        if entry.family is None or not e.source.startswith("fitted on"):
            continue
        rows.append({"family": entry.family, "dtype": entry.dtype_class, "points": int(e.source.split(" ")[2]),
                     "weight_bw": e.weight_bandwidth, "kv_bw": e.kv_bandwidth, "prefill_compute": e.prefill_compute,
                     "decode_compute": e.decode_compute, "decode_band": short(e.decode_band),
                     "tp_decode_band": short(e.tp_decode_band), "prefill_band": short(e.prefill_band),
                     "short_prefill_band": short(e.short_prefill_band)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write calculators/roofline_fit/fitted_profile.json")
    parser.add_argument("--forms", action="store_true", help="also validate the alternative model forms")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    points = load_points()
    validation = validate(points, FINAL)
    profile = build_profile(validation)
    previous = {p.id: predicted_s(p, PREVIOUS_DEFAULTS) / p.measured_s - 1 for p in points}
    violations = [p.id for p in points if predicted_s(p, IDEAL) > p.measured_s]
    report = {
        "points": len(points), "complete_points": len(validation.selected()),
        "sources": sorted(load_sources()), "targets": validation.targets(),
        "medians_leave_one_source_out": _phase_medians(validation, validation.errors),
        "medians_previous_defaults": _phase_medians(validation, previous),
        "ideal_roofline_violations": violations,
        "allreduce_latency_s": profile.allreduce_latency_s,
        "engine_gqa_kv_amplification": profile.engine_gqa_kv_amplification,
        "fitted_fixed_costs_s": {k: round(float(np.exp(v)), 7) for k, v in validation.fit.parameters().items()
                                 if k.endswith("_s")},
        "table": table(validation), "partial_table": table(validation, complete=False),
    }
    if args.forms:
        report["forms"] = []
        for form in FORMS:
            v = validation if form == FINAL else validate(points, form)
            report["forms"].append({"form": form.name, **_phase_medians(v, v.errors)})
    if args.write:
        target = Path(str(resources.files("calculators").joinpath("roofline_fit/fitted_profile.json")))
        target.write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
        print(f"wrote {target}", file=sys.stderr)
    if args.json:
        print_json(report)
        return 0
    print_rows("Fitted efficiencies where there are published points; bands ±80th percentile (points; * pooled "
               "wider than this family and dtype)", efficiency_rows(profile),
               ["family", "dtype", "points", "weight_bw", "kv_bw", "prefill_compute", "decode_compute", "decode_band",
                "tp_decode_band", "prefill_band", "short_prefill_band"])
    print_rows("Leave-one-source-out |predicted / measured - 1|, complete points", report["table"],
               ["gpu", "dtype", "tp", "phase", "points", "sources", "median_abs_error", "p80_abs_error",
                "median_error"])
    print_rows("Partial points (setup not fully stated), predicted by the full fit", report["partial_table"],
               ["gpu", "dtype", "tp", "phase", "points", "sources", "median_abs_error", "median_error"])
    medians = [{"predictor": name, **meds} for name, meds in
               (("fitted, leave-one-source-out", report["medians_leave_one_source_out"]),
                ("previous defaults (0.8 / 0.5 / no overhead)", report["medians_previous_defaults"]))]
    medians += [{"predictor": f["form"], **{k: v for k, v in f.items() if k != "form"}}
                for f in report.get("forms", [])]
    print_rows("Median |error| by phase", medians,
               ["predictor", "decode", "prefill_1k_plus", "prefill_short", "mixed", "partial_points"])
    for name, t in report["targets"].items():
        print(f"target {name}: median |error| {t['median_abs_error']:.1%} over {t['points']} points "
              f"(<= {t['target']:.0%}: {'met' if t['met'] else 'NOT met'})")
    print(f"engine GQA KV amplification: {report['engine_gqa_kv_amplification']}")
    print(f"fixed costs: {report['fitted_fixed_costs_s']}; all-reduce latency: {report['allreduce_latency_s']}")
    print(f"ideal roofline above a measurement: {len(violations)} of {len(points)} points {violations or ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
