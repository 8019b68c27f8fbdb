"""summary.json's levels: per-level latency statistics, rates, goodput, health, server and device means,
the server's own latency percentiles (`server_latency`) and the client-versus-server split.

Each level is built here as a typed `LevelResult`; its shape is contract.level_result's (the whole
file's: contract.summary), the contract with the gate and the notebooks; fields are only ever added.
Every number is a function of `RunData`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from reports.by_model import by_model, slot_waits
from reports.hedging import hedge_stats
from reports.sessions import session_stats
from reports.level_ids import parse_level_id
from reports.diagnostics.canary_speed import steal_by_core
from reports.resources import device_means, energy_per_token_j
from reports.run_data import RunData, frame_windows
from reports.server_metrics.latency import observation_start, server_latency
from reports.server_metrics.means import server_means
from reports.server_metrics.overhead import client_vs_server
from reports.server_metrics.series import ServerSeries
from reports.slo import goodput_rps, request_meets_slo
from reports.stats import summarize
from contract.level_result import (EMPTY, Distribution, LagLimited, LevelResult, LoadgenHealth, Offered,
                                   PercentilePair, TurnStats)
from contract.level_windows import span, total_s
from contract.loadgen_meta import LATENESS_P99_LIMIT_S
from contract.run_json import RunInfo
from contract.slo import CUT_AT_SWITCH, LATENCY_COLUMNS, SLO, SloSample

LATENCY_METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
# Coordinated omission: a request a cap or a busy user held back waited `queue_s` before it was sent;
# E2E counted from the intended send time adds it (what a user arriving on schedule would have seen).
QUEUE_METRICS = ("queue_s", "e2e_with_queue_s")
LATENESS_LIMIT_MS = LATENESS_P99_LIMIT_S * 1000.0  # an open-loop sender later than this at p99 skews the load


def level_order(data: RunData) -> list[str]:
    """Levels grouped by strategy (in the order the run started them), then by offered load, then id."""
    records = data.records
    strategy = records["strategy"].astype(object).where(records["strategy"].notna(), "")
    first_start = records["t_start"].groupby(strategy).min()
    rank = {s: i for i, s in enumerate(first_start.sort_values(kind="stable").index)}
    levels = records.drop_duplicates("level")[["level", "offered_value"]].astype(object)
    levels["strategy"] = strategy.loc[levels.index]
    keys = [(rank[s], np.inf if pd.isna(v) else v, str(lvl)) for lvl, v, s in levels.itertuples(index=False)]
    return [key[2] for key in sorted(keys)]


def build_levels(data: RunData, slo: SLO, progress: Callable[[str], None] | None = None) -> list[LevelResult]:
    """One summary.json level (contract.level_result.LevelResult) per level with measure-phase records, in
    `level_order`."""
    records = data.records
    measure = records["phase"] == "measure"
    ok_measure = data.measured_ok().to_numpy()
    gaps_by_level = _itl_by_level(data, ok_measure)
    default_strategy = data.run.server.strategy
    grouped = dict(tuple(records[measure].groupby("level", sort=False, observed=True)))
    series = ServerSeries.from_frame(data.server_metrics)
    warmup = records[records["phase"] == "warmup"]
    warmups = {level: group[["t_start", "t_end"]].to_numpy(dtype=float)
               for level, group in warmup.groupby("level", observed=True)}
    levels = []
    for seed, level in enumerate(level_order(data)):
        if level not in grouped:
            continue
        if progress:
            progress(level)
        frame = grouped[level]
        levels.append(_level_result(level, frame, gaps_by_level.get(level, np.empty(0)), slo, seed,
                                    default_strategy, data, series, warmups.get(level, np.empty((0, 2)))))
    return levels


def slo_samples(data: RunData) -> dict[str, SloSample]:
    """{level id: its measure-phase requests as the SLO's judge reads them} (reports.verdict): the
    `incomplete` ones (in flight when the level stopped) unfinished, other statuses but ok failed; a
    compare run's requests cut off at a slice switch and a hedge's cancelled copies left out
    (SloSample.from_records)."""
    records = data.records
    judged = ((records["phase"] == "measure") & records["switch"].astype(object).ne(CUT_AT_SWITCH)
              & (records["status"] != "cancelled"))   # a hedge's losing copy: its pair is judged by the kept one
    out = {}
    for level, frame in records[judged].groupby("level", sort=False, observed=True):
        status = frame["status"]
        out[str(level)] = SloSample.from_arrays(ok=(status == "ok").to_numpy(),
                                                unfinished=(status == "incomplete").to_numpy(),
                                                **{c: frame[c].to_numpy(dtype=float) for c in LATENCY_COLUMNS})
    return out


def _itl_by_level(data: RunData, ok_measure: np.ndarray) -> dict[str, np.ndarray]:
    """Pooled inter-token gaps of each level's ok measure records: {level: gaps [G_level]}.

    Gaps are labelled with their record's level code (-1: not ok/measure). Runs
    write levels one after another, so the labels form a few contiguous runs that
    are sliced out directly; heavily interleaved labels fall back to a radix argsort.
    """
    codes, names = pd.factorize(data.records["level"])
    label_dtype = np.int32 if len(names) > 32_000 else np.int16
    record_label = np.where(ok_measure, codes, -1).astype(label_dtype)
    gap_label = record_label[data.itl_record]
    gaps = data.itl_gaps
    starts = np.concatenate(([0], np.flatnonzero(np.diff(gap_label)) + 1))
    if len(starts) > 8 * (len(names) + 1):
        order = np.argsort(gap_label, kind="stable")  # radix sort for small ints: O(G)
        gaps, gap_label = gaps[order], gap_label[order]
        starts = np.concatenate(([0], np.flatnonzero(np.diff(gap_label)) + 1))
    ends = np.append(starts[1:], len(gap_label))
    pieces: dict[int, list[np.ndarray]] = {}
    for start, end in zip(starts, ends):
        if end > start and gap_label[start] >= 0:
            pieces.setdefault(int(gap_label[start]), []).append(gaps[start:end])
    return {names[code]: (parts[0] if len(parts) == 1 else np.concatenate(parts))
            for code, parts in pieces.items()}


def _level_result(level: str, frame: pd.DataFrame, itl_gaps: np.ndarray, slo: SLO, seed: int,
                 default_strategy: str | None, data: RunData, series: ServerSeries,
                 warmups: np.ndarray) -> LevelResult:
    parsed = parse_level_id(level, default_strategy)
    ok = frame[frame["status"] == "ok"]
    windows = frame_windows(frame)                      # one, or one per round (sweep --rounds)
    start, end = span(windows)
    duration = total_s(windows) or None
    output_tokens = float(ok["output_tokens"].sum())
    # `incomplete` = still in flight when the level stopped: neither a success nor an error; `cancelled` = a
    # hedge's losing copy (its pair's answer is the kept copy's record)
    in_flight = frame["status"] == "incomplete"
    finished = frame[~in_flight & (frame["status"] != "cancelled")]
    requests, n_ok = len(finished), len(ok)
    metrics = {
        "ttft_s": summarize(ok["ttft_s"].to_numpy(), seed),
        "tpot_s": summarize(ok["tpot_s"].to_numpy(), seed),
        "itl_s": summarize(itl_gaps, seed),
        "e2e_s": summarize(ok["e2e_s"].to_numpy(), seed),
        "ttfa_s": summarize(ok["ttfa_s"].to_numpy(dtype=float), seed),   # first answer token (reasoning models)
        "queue_s": summarize(ok["queue_s"].to_numpy(), seed),
        "e2e_with_queue_s": summarize((ok["e2e_s"] + ok["queue_s"]).to_numpy(), seed),   # NaN without queue_s
    }
    health = loadgen_health(frame, (data.loadgen_meta.get("levels") or {}).get(level))
    health = replace(health, lag_limited=lag_limited(metrics, health.loop_lag_p50_ms, health.loop_lag_p99_ms))
    server_side = server_latency(series, observed_windows(windows, warmups))
    device = device_means(data.samples, windows)
    return LevelResult(
        level=level,
        strategy=parsed.strategy,
        offered=Offered(parsed.offered_kind, next(iter(parsed.offered.values()))) if parsed.offered else None,
        requests=requests,
        ok=n_ok,
        errors=requests - n_ok,
        incomplete=int(in_flight.sum()),
        error_rate=(requests - n_ok) / requests if requests else None,
        statuses={str(k): int(v) for k, v in frame["status"].value_counts().items() if v},
        window=(start, end),
        windows=tuple(tuple(w) for w in windows),
        duration_s=duration,
        request_rate_rps=n_ok / duration if duration else None,
        output_tokens_per_s=output_tokens / duration if duration else None,
        prompt_tokens_per_s=float(ok["prompt_tokens"].sum()) / duration if duration else None,
        output_tokens=int(output_tokens),
        prompt_tokens_mean=float(ok["prompt_tokens"].mean()) if n_ok else None,
        output_tokens_mean=float(ok["output_tokens"].mean()) if n_ok else None,
        reasoning_tokens_mean=(float(ok["reasoning_tokens"].mean())
                               if n_ok and ok["reasoning_tokens"].notna().any() else None),
        goodput_rps=goodput_rps(frame, slo, duration),
        slo_attainment=float(request_meets_slo(finished, slo).mean()) if slo.is_set and requests else None,
        metrics=metrics,
        loadgen=health,
        by_turn=by_turn(ok),
        sessions=session_stats(frame),
        hedging=hedge_stats(frame),
        by_model=by_model(ok, data.engine_requests),
        lora_slot_waits=slot_waits(ok, data.engine_requests),
        server=server_means(series, windows),
        server_latency=server_side,
        device=device,
        host_steal=steal_by_core(data.canary, windows),   # {core: share the VM's host took}; {} without canary
        client_vs_server=client_vs_server(metrics, server_side),
        energy_per_output_token_j=energy_per_token_j(device, duration, output_tokens),
    )


def observed_windows(windows: list[tuple[float, float]], warmups: np.ndarray) -> list[tuple[float, float]]:
    """The server's view of each window opens once its own warm-up requests have finished
    (`observation_start`). `warmups`: [W, 2] the level's warm-up requests' (send, end) times. A round's
    own are those sent after the previous round's window ended and before its own began: with a
    sweep's rounds interleaved, the next round's warm-up also ends before the next window, and taken
    by its end it would shut this round's view (every round but the last came out empty)."""
    sends, ends = np.asarray(warmups, dtype=float).reshape(-1, 2).T
    observed = []
    for k, (start, end) in enumerate(windows):
        previous_end = windows[k - 1][1] if k else -np.inf
        own = ends[(sends >= previous_end) & (sends <= start) & np.isfinite(ends)]
        observed.append((observation_start(start, own), end))
    return observed


def by_turn(ok: pd.DataFrame) -> dict[str, TurnStats] | None:
    """Multi-turn runs: {turn: TurnStats} over a level's ok measure records (later turns carry longer
    histories); None when no record has a turn. In a --session run, the main agent's requests (a
    sub-agent's carry its own short history, not the turn's)."""
    if "agent" in ok and ok["agent"].notna().any():
        ok = ok[ok["agent"].astype(object) == "main"]
    turns = ok["turn"].dropna()
    if turns.empty:
        return None
    out = {}
    for turn, group in ok.loc[turns.index].groupby(turns.astype(int), sort=True):
        pairs = {}
        for metric in ("ttft_s", "tpot_s", "e2e_s"):
            values = group[metric].dropna().to_numpy()
            p50, p99 = np.percentile(values, [50, 99]) if len(values) else (None, None)
            pairs[metric] = PercentilePair(p50=None if p50 is None else float(p50),
                                           p99=None if p99 is None else float(p99))
        out[str(turn)] = TurnStats(requests=len(group), prompt_tokens_mean=float(group["prompt_tokens"].mean()),
                                   cached_share=cached_share(group), **pairs)
    return out


def cached_share(ok: pd.DataFrame) -> float | None:
    """Of the prompt tokens of the records whose server said its prefix-cache hits, the hits; None without."""
    known = ok[ok["cached_tokens"].notna() & ok["prompt_tokens"].notna()] if "cached_tokens" in ok else ok.iloc[:0]
    prompt = float(known["prompt_tokens"].sum())
    return float(known["cached_tokens"].sum()) / prompt if prompt > 0 else None


def loadgen_health(frame: pd.DataFrame, meta: dict | None = None) -> LoadgenHealth:
    """Send lateness (t_start - t_sched) of open-loop records in ms, workers, and the generator's
    own CPU and warnings from requests.meta.json (`meta` = that file's entry for this level).

    `late` is True when p99 lateness exceeds LATENESS_LIMIT_MS: the generator,
    not the server, was then shaping the arrivals.
    """
    out: dict = {"workers": int(frame["worker"].nunique())}
    lateness_ms = ((frame["t_start"] - frame["t_sched"]) * 1000.0).dropna().to_numpy()
    if len(lateness_ms):
        p50, p99 = np.percentile(lateness_ms, [50, 99])
        out.update({"lateness_p50_ms": float(p50), "lateness_p99_ms": float(p99),
                    "lateness_max_ms": float(lateness_ms.max()),
                    "late": bool(p99 > LATENESS_LIMIT_MS)})
    if isinstance(meta, dict):
        cpu = [p.get("cpu_max_pct") for p in (meta.get("processes") or {}).values() if isinstance(p, dict)]
        cpu = [c for c in cpu if isinstance(c, (int, float))]
        if cpu:
            out["cpu_max_pct"] = float(max(cpu))
        out["limited_by_loadgen"] = bool(meta.get("limited_by_loadgen"))
        for name in ("p50", "p99", "max"):   # the worst process's event-loop lag: the timings' own error bar
            value = meta.get(f"loop_lag_{name}_s")
            if isinstance(value, (int, float)):
                out[f"loop_lag_{name}_ms"] = float(value) * 1000.0
        out["warnings"] = tuple(str(w) for w in meta.get("warnings") or [])
    return LoadgenHealth(**out)


LAG_JUDGED = ("ttft_s", "itl_s", "e2e_s")   # TPOT is (E2E - TTFT) / (tokens - 1): a late timer moves it
                                            # by the lag over its tokens, far less than the others


def lag_limited(metrics: dict[str, Distribution], lag_p50_ms: float | None,
                lag_p99_ms: float | None) -> tuple[LagLimited, ...]:
    """The percentiles the load generator's timing error could move by more than their own uncertainty.

    The event-loop lag is how late the generator's clock reads a moment (a 1 ms timer that fires late
    by that much), so a reading of TTFT, ITL or E2E carries up to that much error: the median reading
    about the lag's median, a tail reading about the lag's p99. That error bar is set beside the
    percentile's own 95% confidence interval: where the interval is the wider, the sample limits the
    figure, not the generator; where it is narrower, the generator does. In LAG_JUDGED order."""
    out = []
    for metric in LAG_JUDGED:
        figures = metrics.get(metric) or EMPTY
        for q, lag_ms in (("p50", lag_p50_ms), ("p95", lag_p99_ms), ("p99", lag_p99_ms)):
            ci = figures.ci95(q)
            if lag_ms is not None and ci and None not in ci and lag_ms > (ci[1] - ci[0]) * 1e3:
                out.append(LagLimited(metric=metric, q=q, lag_ms=lag_ms, ci_ms=(ci[1] - ci[0]) * 1e3))
    return tuple(out)


def loadgen_warnings(run: RunInfo, levels: list[LevelResult]) -> list[str]:
    """The load generator's warnings: per level from requests.meta.json, and run.json's notes."""
    warnings = [f"{lvl.level}: {w}" for lvl in levels for w in lvl.loadgen.warnings or ()]
    return warnings + [str(note) for note in run.notes]
