"""``servecap calc calibrate``: fit the simulator's step model, or (--roofline) an efficiency profile."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from calculators.cli.inputs import gpu_from_args
from calculators.cli.output import emit, print_json, print_rows
from engine_core.models import resolve_model


def cmd_calibrate(args) -> None:
    import pandas as pd

    from calculators.sim.calibrate import fit_step_model, fit_step_time

    try:
        frame = pd.read_csv(args.steps)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"steps file {args.steps!r} cannot be read: {error}") from None
    missing = {"batch_size", "step_s"} - set(frame.columns)
    if missing:
        raise ValueError(f"steps file {args.steps!r} lacks column(s) {', '.join(sorted(missing))}")
    if args.roofline:
        return _calibrate_roofline(args, frame)
    line = fit_step_time(frame["batch_size"], frame["step_s"])
    model = fit_step_model(frame["batch_size"], frame["step_s"],
                           prefill_tokens=frame["prefill_tokens"] if "prefill_tokens" in frame else None)
    emit(args, "Step-time fit", {"base_s": line.base_s, "per_seq_s": line.per_seq_s, "r_squared": line.r_squared,
                                 "samples": line.samples, "step_model": asdict(model)})


def _calibrate_roofline(args, frame) -> None:
    """--roofline: fit an efficiency profile per TP degree from the steps and write it to --out."""
    from calculators.roofline_fit.profile import MeasuredStep, calibrate_profile

    if args.model is None or args.gpu is None:
        raise ValueError("--roofline needs --model and --gpu (what the steps were measured on)")
    steps = []
    for i, row in enumerate(frame.to_dict("records")):
        try:
            steps.append(MeasuredStep(step_s=float(row["step_s"]), batch=int(row["batch_size"]),
                                      context=float(row.get("context_tokens", 0) or 0),
                                      prefill_tokens=int(row.get("prefill_tokens", 0) or 0),
                                      tp=int(row.get("tp", args.tp) or args.tp)))
        except (TypeError, ValueError) as error:
            raise ValueError(f"steps file {args.steps!r} row {i + 2}: {error}") from None
    profile, fits = calibrate_profile(resolve_model(args.model), gpu_from_args(args), steps, dtype=args.dtype,
                                      kv_dtype=args.kv_dtype, engine=args.engine)
    if args.out:
        try:
            Path(args.out).write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
        except OSError as error:
            raise ValueError(f"cannot write {args.out!r}: {error}") from None
    rows = [{"tp": f.tp, "samples": f.samples, "rms_relative_error": f.rms_relative_error,
             **{k: getattr(f.efficiencies, k) for k in ("weight_bandwidth", "kv_bandwidth", "prefill_compute",
                                                         "decode_compute", "decode_overhead_s", "per_sequence_s",
                                                         "prefill_overhead_s")}} for f in fits]
    if args.json:
        return print_json({"profile": profile.to_dict(), "fits": [{**row, "fitted": list(f.fitted)}
                                                                  for row, f in zip(rows, fits)],
                           "written": args.out})
    print_rows(f"Roofline calibration of {args.model} on {args.gpu} {args.dtype} (one fit per TP degree)", rows,
               list(rows[0]))
    for f in fits:
        print(f"tp={f.tp}: the steps determined {', '.join(f.fitted) or 'nothing'}; the rest kept the defaults")
    if args.out:
        print(f"wrote {args.out}; use it with --efficiency-profile {args.out}")
