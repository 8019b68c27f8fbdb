"""The classic-model report's page: the answer first (the best throughput under the p99 limit, and the
throughput-vs-latency figure), then each level's split of a request between client and server, the
batches the server formed, and the memory in use."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.classic.summary import best_level
from reports.classic.predictions import sentences as predictions_sentences
from reports.figures.common import FigureFile

FIGURE = "classify_throughput_vs_latency.png"
MS = 1e3
SPLIT_NOTE = (
    "Each level's mean request as the server's Triton counters split it (nv_inference_queue_duration_us, "
    "nv_inference_compute_{input,infer,output}_duration_us, nv_inference_request_duration_us), beside the "
    "client's mean E2E over the same requests (those that finished between the two scrapes). 'in server, "
    "other' is the server's request time outside queue and compute (its protocol stack parsing and "
    "writing); 'transport' is what the client saw beyond the server's request time (both ends' HTTP or "
    "gRPC stacks and the loopback): the client-server overhead. A batch's compute is charged to each "
    "request in it, as Triton charges it.")


def answer(levels: list[dict], p99_limit_ms: float | None) -> list[str]:
    best = best_level(levels)
    limit = f"p99 E2E <= {p99_limit_ms:g} ms" if p99_limit_ms is not None else "no latency limit given"
    if best is None:
        return [f"No level met {limit} with at most 1% of its requests failing."]
    unit = best.get("unit", "rows")
    rows = f" ({best['rows_per_s']:.0f} {unit}/s at {best['rows_per_request']:.1f} {unit} per request)"
    text = (f"Highest throughput with {limit}: **{best['req_per_s']:.0f} req/s**{rows} at {best['offered']} "
            f"({best['level']}), p50/p95/p99 {best['e2e_p50_s'] * MS:.2f} / {best['e2e_p95_s'] * MS:.2f} / "
            f"{best['e2e_p99_s'] * MS:.2f} ms.")
    server = best.get("server")
    if server:
        text += (f" The server queued each request {server['queue_s'] * MS:.2f} ms and computed "
                 f"{server['compute_s'] * MS:.2f} ms on average, in batches of {server['batch_rows']:.1f} "
                 f"{'inputs' if unit == 'tokens' else 'rows'}.")
    return [text]


def levels_table(levels: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{
        "level": lv["level"], "protocol": lv.get("protocol") or "", "req/s": _f(lv.get("req_per_s"), 1),
        f"{lv.get('unit', 'rows')}/s": _f(lv.get("rows_per_s"), 0), "p50 (ms)": _f(lv.get("e2e_p50_s"), 2, MS),
        "p95 (ms)": _f(lv.get("e2e_p95_s"), 2, MS), "p99 (ms)": _f(lv.get("e2e_p99_s"), 2, MS),
        "requests": lv["requests"], "errors": lv["errors"] if not lv.get("error_statuses") else
        f"{lv['errors']} ({', '.join(lv['error_statuses'])})",
    } for lv in levels])


def split_table(levels: list[dict]) -> pd.DataFrame:
    rows = []
    for lv in levels:
        server = lv.get("server")
        if not server:
            continue
        rows.append({
            "level": lv["level"], "queue (ms)": _f(server["queue_s"], 3, MS),
            "compute (ms)": _f(server["compute_s"], 3, MS),
            "in server, other (ms)": _f(server["in_server_other_s"], 3, MS),
            "server request (ms)": _f(server["server_request_s"], 3, MS),
            "transport (ms)": _f(server["transport_s"], 3, MS),
            "client E2E (ms)": _f(server["client_e2e_s"], 3, MS),
            "requests (server / client)": f"{server['server_requests']:.0f} / {server['client_requests']}",
        })
    return pd.DataFrame(rows)


def batch_and_memory_table(levels: list[dict]) -> pd.DataFrame:
    rows = []
    for lv in levels:
        server = lv.get("server") or {}
        memory = lv.get("memory") or []
        rows.append({
            "level": lv["level"], f"{lv.get('unit', 'rows')} per request": _f(lv.get("rows_per_request"), 1),
            "rows (inputs) per batch, server": _f(server.get("batch_rows"), 1),
            "batches": _f(server.get("batches"), 0),
            "peak memory": "; ".join(f"{m['device']}: {m['peak_bytes'] / 2**20:.0f} MiB" for m in memory) or "-",
        })
    return pd.DataFrame(rows)


def draw_figure(levels: list[dict], out_dir: Path) -> FigureFile | None:
    measured = [lv for lv in levels if lv.get("req_per_s")]
    if not measured:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = [lv["req_per_s"] for lv in measured]
    for q, style in ((50, "o-"), (95, "s--"), (99, "^:")):
        ax.plot(x, [lv[f"e2e_p{q}_s"] * MS for lv in measured], style, label=f"p{q}")
    for lv in measured:
        ax.annotate(lv.get("offered", ""), (lv["req_per_s"], lv["e2e_p99_s"] * MS), fontsize=8,
                    textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("E2E latency (ms)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / FIGURE, dpi=110)
    plt.close(fig)
    return FigureFile(FIGURE, "Throughput against E2E latency", "Each point is a load level (labelled by its "
                      "offered load): its throughput and its p50, p95 and p99 latency.")


def sections(levels: list[dict], p99_limit_ms: float | None, figure: FigureFile | None, missing: list[str],
             predictions: list[dict] = ()):
    quality = predictions_sentences(list(predictions))
    out = [("Answer", [*answer(levels, p99_limit_ms), *quality, *([figure] if figure else []),
                       levels_table(levels)])]
    split = split_table(levels)
    if not split.empty:
        out.append(("Client versus server", [SPLIT_NOTE, split]))
    else:
        out.append(("Client versus server", ["The server exposed no Triton counters (nv_inference_*), so its "
                                             "queue and compute split is not known."]))
    out.append(("Batches and memory", [batch_and_memory_table(levels)]))
    if missing:
        out.append(("Missing", [" ".join(missing)]))
    return out


def _f(value, digits: int, scale: float = 1.0) -> str:
    return "" if value is None else f"{value * scale:.{digits}f}"
