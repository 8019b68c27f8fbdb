"""report.md and report.html from one list of sections (verdict and tables first, figures after).

A section is (heading, blocks); a block is a paragraph (str), a table
(DataFrame) or a figure (FigureFile). The HTML embeds each PNG as base64, so
the file is self-contained; each <img> names its PNG in `alt` and `data-file`.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from reports import tables
from reports.figures.common import FigureFile
from reports.summary import LATENESS_LIMIT_MS

Block = str | pd.DataFrame | FigureFile


def _verdict_sentences(summary: dict) -> list[str]:
    verdict = summary["verdict"]
    lines = []
    point, cost = verdict["operating_point"], verdict["cost"]
    slo = {k: v for k, v in verdict["slo"].items() if v is not None}
    lines.append("SLOs (p99): " + (", ".join(f"{k} = {v:g}" for k, v in slo.items()) if slo
                                   else "none given (use --slo-ttft-ms / --slo-tpot-ms / --slo-e2e-ms)") + ".")
    if point:
        lines.append(f"Operating point: **{point['level']}** ({point['basis']}): "
                     f"{point['output_tokens_per_s']:.1f} output tokens/s, {point['request_rate_rps']:.2f} req/s.")
    else:
        lines.append("Operating point: none (" + cost.get("unavailable", "no level qualifies") + ").")
    if "usd_per_1m_output_tokens" in cost and cost["usd_per_1m_output_tokens"] is not None:
        lines.append(f"Cost at that point: **${cost['usd_per_1m_output_tokens']:.3f} per 1M output tokens** "
                     f"(${cost['usd_per_1m_total_tokens']:.3f} per 1M prompt+output tokens) at "
                     f"${cost['hourly_usd']:g}/GPU-hour x {cost['num_gpus']} ({cost['source']}).")
    elif point:
        lines.append("Cost: not computed: " + cost.get("unavailable", "unknown price") + ".")
    return lines


def sections(summary: dict, figures: list[FigureFile]) -> list[tuple[str, list[Block]]]:
    out: list[tuple[str, list[Block]]] = []
    verdict: list[Block] = _verdict_sentences(summary)
    if summary["verdict"]["max_sustainable"]:
        verdict.append(tables.verdict_table(summary))
    verdict.append(tables.knee_table(summary))
    out.append(("Verdict", verdict))
    notes: list[Block] = [f"- {note}" for note in summary["missing"]] + \
        [f"- load generator / run notes: {w}" for w in summary["loadgen_warnings"]]
    late = [lvl["level"] for lvl in summary["levels"] if lvl["loadgen"].get("late")]
    if late:
        notes.append(f"- load generator sent late (p99 lateness > {LATENESS_LIMIT_MS:g} ms) at: {', '.join(late)}; "
                     "those levels measure the generator as much as the server")
    limited = [lvl for lvl in summary["levels"] if lvl["loadgen"].get("limited_by_loadgen")]
    if limited:
        lags = [f"{lvl['level']} ({lvl['loadgen']['loop_lag_p99_ms']:.2f} ms)" for lvl in limited
                if lvl["loadgen"].get("loop_lag_p99_ms") is not None]
        notes.append(f"- WARNING: the load generator, not the server, was a limit at: "
                     f"{', '.join(lvl['level'] for lvl in limited)} (see Load-generator health)"
                     + (f"; its event-loop lag p99 bounds the timing error there: {', '.join(lags)}" if lags else "")
                     + "; give it more processes and cores (servecap sweep --loadgen-processes N) or lower the load")
    if notes:
        out.append(("What is missing or suspect", ["\n".join(notes)]))
    out.append(("Levels", [tables.levels_table(summary)]))
    turns = tables.turn_table(summary)
    if not turns.empty:
        out.append(("Latency by turn", [turns]))
    predicted = tables.predicted_table(summary)
    if not predicted.empty:
        out.append(("Predicted vs measured", [predicted]))
    out.append(("Figures", list(figures)))
    for metric in tables.LATENCY_COLUMNS:
        out.append((f"Latency detail: {metric}", [tables.latency_table(summary, metric)]))
    out.append(("Load-generator health", [tables.health_table(summary)]))
    out.append(("Server and device means per level", [tables.resources_table(summary)]))
    return out


def to_markdown(title: str, parts: list[tuple[str, list[Block]]]) -> str:
    lines = [f"# {title}", ""]
    for heading, blocks in parts:
        lines += [f"## {heading}", ""]
        for block in blocks:
            if isinstance(block, pd.DataFrame):
                lines.append(block.to_markdown(index=False) if not block.empty else "(no rows)")
            elif isinstance(block, FigureFile):
                lines.append(f"![{block.title}]({block.name})\n\n*{block.caption}*")
            else:
                lines.append(block)
            lines.append("")
    return "\n".join(lines)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f2f2f2}img{max-width:100%}figure{margin:1em 0}figcaption{font-size:13px;color:#555}"""


def _inline_markdown(text: str) -> str:
    escaped = html.escape(text)
    parts = escaped.split("**")
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))


def to_html(title: str, parts: list[tuple[str, list[Block]]], figure_dir: Path) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for heading, blocks in parts:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        for block in blocks:
            if isinstance(block, pd.DataFrame):
                body.append(block.to_html(index=False, border=0) if not block.empty else "<p>(no rows)</p>")
            elif isinstance(block, FigureFile):
                data = base64.b64encode((figure_dir / block.name).read_bytes()).decode("ascii")
                body.append(f'<figure><img alt="{block.name}" data-file="{block.name}" '
                            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(block.title)}: '
                            f"{html.escape(block.caption)}</figcaption></figure>")
            elif block.startswith("- "):
                items = "".join(f"<li>{_inline_markdown(line[2:])}</li>" for line in block.splitlines())
                body.append(f"<ul>{items}</ul>")
            else:
                body.append(f"<p>{_inline_markdown(block)}</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
