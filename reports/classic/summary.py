"""Per level of a classic model's sweep: throughput (requests per second, and rows per second for a
classifier or input tokens per second for an embedding model), latency percentiles, the server's split
of a request (`server_split`), the batches it formed, the memory in use, and whether it meets the SLO
(the contract's judge over its measure-phase requests, as every other level is judged)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from contract.slo import SLO, SloSample, judge
from reports.classic.server_split import level_split
from reports.run_data import RunData
from reports.summary import slo_samples

PERCENTILES = (50, 95, 99)


def classic_levels(data: RunData, slo: SLO) -> list[dict]:
    """One dict per level, in the order the run planned them; `meets_slo` and `why_not` judge its
    measure-phase requests against `slo` (contract.slo.judge)."""
    records = data.records
    samples = slo_samples(data)
    windows = data.level_windows()
    model = data.run.server.served_model
    unit = "tokens" if data.run.workload.scenario == "embed" else "rows"   # what a record's prompt_tokens counts
    planned = [entry.level for entry in data.run.levels] or list(dict.fromkeys(records["level"].astype(str)))
    out = []
    for level in planned:
        rows = records[records["level"].astype(str) == level]
        measured = rows[rows["phase"] == "measure"]
        ok = measured[measured["status"] == "ok"]
        spans = windows.get(level) or []
        judged = judge(slo, samples.get(level, SloSample(ok=0)))
        verdict = {"meets_slo": judged.meets, "why_not": judged.reason or None}
        if ok.empty or not spans:
            out.append({"level": level, "requests": 0, "errors": int((measured["status"] != "ok").sum()), **verdict})
            continue
        seconds = sum(end - start for start, end in spans)
        e2e = ok["e2e_s"].to_numpy(dtype=float)
        span = (min(s for s, _ in spans), max(e for _, e in spans))
        entry = {
            "level": level,
            "unit": unit,
            "offered": _offered(rows),
            "protocol": _first(ok, "protocol"),
            "requests": int(len(ok)),
            "errors": int((measured["status"] != "ok").sum()),
            "error_statuses": sorted(set(measured.loc[measured["status"] != "ok", "status"].astype(str))),
            "req_per_s": len(ok) / seconds if seconds > 0 else None,
            "rows_per_s": float(ok["prompt_tokens"].fillna(0).sum()) / seconds if seconds > 0 else None,
            "rows_per_request": float(ok["prompt_tokens"].mean()),
            **{f"e2e_p{q}_s": float(np.percentile(e2e, q)) for q in PERCENTILES},
            "e2e_mean_s": float(e2e.mean()),
            "server": level_split(data.server_metrics, model, span, ok["t_end"].to_numpy(dtype=float), e2e),
            "memory": _memory(data.samples, span),
            **verdict,
        }
        out.append(entry)
    return out


def best_level(levels: list[dict]) -> dict | None:
    """The level of highest throughput (req/s) among those that meet the SLO (`meets_slo`)."""
    meeting = [lv for lv in levels if lv.get("req_per_s") and lv["meets_slo"]]
    return max(meeting, key=lambda lv: lv["req_per_s"]) if meeting else None


def _offered(rows: pd.DataFrame) -> str:
    kind, value = rows["offered_kind"].iloc[0], rows["offered_value"].iloc[0]
    if kind == "concurrency":
        return f"c={int(value)}"
    return f"{value:g} req/s" if pd.notna(value) else str(rows["level"].iloc[0])


def _first(frame: pd.DataFrame, column: str):
    if column not in frame.columns:
        return None
    values = frame[column].dropna()
    return str(values.iloc[0]) if not values.empty else None


def _memory(samples: pd.DataFrame | None, span: tuple[float, float]) -> list[dict]:
    """Peak memory in use per sampled device (the server process's RSS on a CPU, each GPU's memory) over the span."""
    if samples is None or samples.empty:
        return []
    inside = samples[(samples["t"] >= span[0]) & (samples["t"] <= span[1])].dropna(subset=["mem_used_bytes"])
    return [{"source": str(source), "device": str(device), "peak_bytes": float(group["mem_used_bytes"].max()),
             "total_bytes": float(group["mem_total_bytes"].max()) if group["mem_total_bytes"].notna().any() else None}
            for (source, device), group in inside.groupby(["source", "device"])]
