"""report.md and report.html from one list of sections (the answer first, the detail collapsed).

A section is (heading, blocks); a block is a paragraph (str), a table
(DataFrame), a figure (FigureFile) or a collapsed group of blocks (Details):
see reports.page.blocks. The HTML embeds each PNG as base64, so the file is
self-contained; each <img> names its PNG in `alt` and `data-file`.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

from reports.quality.carry import quality_sentence
from reports import answer
from reports.page import tables
from reports.predict import section as validation_section
from reports.page.blocks import Block, Details
from reports.figures.common import FigureFile
from reports.notices import notices
from contract.summary import Summary

CLIENT_SERVER_NOTE = (
    "The server's side comes from its own Prometheus histograms over the level's window (docs/server_metrics.md). "
    "Its means (_sum / _count) are exact; its percentiles are interpolated inside a bucket, as Prometheus' "
    "histogram_quantile does, so each is only known to lie in the [bucket] shown (vLLM's request-time buckets start "
    "at 300 ms). Overhead = client - server: the client, the network and the server's front end outside its own "
    "clock. The mean TTFT splits exactly into that overhead, the server's front end (HTTP, tokenization, hand-over), "
    "the engine's queueing and its prefill; percentiles do not add up, so the split is of the means.")

def _verdict_sentences(summary: Summary) -> list[str]:
    verdict = summary.verdict
    lines = []
    point, cost = verdict.operating_point, verdict.cost
    slo = verdict.slo.to_dict()   # the limits set
    lines.append("SLOs (p99): " + (", ".join(f"{k} = {v:g}" for k, v in slo.items()) if slo
                                   else "none given (use --slo-ttft-ms / --slo-tpot-ms / --slo-e2e-ms)") + ".")
    if point:
        lines.append(f"Operating point: **{point.level}** ({point.basis}): "
                     f"{point.output_tokens_per_s:.1f} output tokens/s, {point.request_rate_rps:.2f} req/s.")
    else:
        lines.append("Operating point: none (" + cost.get("unavailable", "no level qualifies") + ").")
    if "usd_per_1m_output_tokens" in cost and cost["usd_per_1m_output_tokens"] is not None:
        lines.append(f"Cost at that point: **${cost['usd_per_1m_output_tokens']:.3f} per 1M output tokens** "
                     f"(${cost['usd_per_1m_total_tokens']:.3f} per 1M prompt+output tokens) at "
                     f"${cost['hourly_usd']:g}/GPU-hour x {cost['num_gpus']} ({cost['source']}).")
    elif point:
        lines.append("Cost: not computed: " + cost.get("unavailable", "unknown price") + ".")
    return lines


ANSWER_FIGURE = "throughput_vs_latency.png"


def _join_bullets(lines: list[str]) -> list[str]:
    """Consecutive "- " lines into one block (one list)."""
    out: list[str] = []
    for line in lines:
        if line.startswith("- ") and out and out[-1].startswith("- "):
            out[-1] += "\n" + line
        else:
            out.append(line)
    return out


FIRST_SCREEN_NOTICES = 3   # grouped warnings on the first screen; more go into one collapsed block


def _notice_blocks(summary: Summary, severity: str) -> list[Block]:
    """Each notice as one line (its title and levels), with what it means and its fix collapsed under it;
    past FIRST_SCREEN_NOTICES, the rest collapsed together."""
    blocks: list[Block] = []
    found = [n for n in notices(summary) if n.severity == severity]
    for notice in found:
        said = notice.meaning + (f" Fix: {notice.fix}." if notice.fix else "")
        blocks += [f"**{notice.title.capitalize()}**: {'; '.join(notice.items)}",
                   Details("What it means" + (" and how to fix it" if notice.fix else ""), [said])]
    if len(found) > FIRST_SCREEN_NOTICES:
        shown = 2 * FIRST_SCREEN_NOTICES
        blocks = blocks[:shown] + [Details(f"{len(found) - FIRST_SCREEN_NOTICES} more", blocks[shown:])]
    return blocks


def answer_sections(summary: Summary, figures: list[FigureFile],
                    preface: list[str] = ()) -> list[tuple[str, list[Block]]]:
    """"Answer" (the sentences, the throughput-vs-latency figure, one row per strategy, the per-SLO
    detail collapsed) and, when there are any, "Warnings" and "Notes"."""
    answer_figure = [fig for fig in figures if fig.name == ANSWER_FIGURE]
    first: list[Block] = [*preface, *_join_bullets(answer.sentences(summary)), *answer_figure,
                          answer.strategy_rows(summary)]
    detail: list[Block] = _verdict_sentences(summary)
    if summary.verdict.max_sustainable:
        detail.append(tables.verdict_table(summary))
    detail.append(tables.knee_table(summary))
    first.append(Details("Per-SLO detail: max sustainable load per SLO with its p99 and interval, the knees, "
                         "the operating point", detail))
    out: list[tuple[str, list[Block]]] = [("Answer", first)]
    for title, severity in (("Warnings", "warning"), ("Notes", "note")):
        blocks = _notice_blocks(summary, severity)
        if blocks:
            out.append((title, blocks))
    return out


def levels_section(summary: Summary) -> tuple[str, list[Block]]:
    return ("Levels", [Details(f"One row per level ({len(summary.levels)} levels): rates, goodput, "
                               "headline percentiles", [tables.levels_table(summary)])])


POLICY_NOTE = ("The fleet's policies, from its fleet.json: each part judged on the requests it answered (SLO "
               "attainment over the fleet's windows; a shadow's copies on its engines' clock), and every request sent "
               "counted once.")


def sections(summary: Summary, figures: list[FigureFile],
             validation_figures: list[FigureFile] = ()) -> list[tuple[str, list[Block]]]:
    """The answer first (words, the throughput-vs-latency figure, one row per strategy), then the
    warnings, the client-versus-server split, the validation, and the detail, collapsed."""
    preface = [quality_sentence(summary.quality) + "."] if summary.quality else []
    out = answer_sections(summary, figures, preface)
    client_server = tables.client_server_table(summary)
    if not client_server.empty:
        out.append(("Client versus server", [CLIENT_SERVER_NOTE, client_server]))
    validated = validation_section.section(summary, list(validation_figures))
    if validated is not None:
        out.append(validated)
    predicted = tables.predicted_table(summary)
    if not predicted.empty:
        out.append(("Predicted vs measured", [Details("Every predicted quantity per level (calibrated on all "
                                                       "levels: in-sample)", [predicted])]))
    out.append(levels_section(summary))
    policies = tables.policy_table(summary)
    if not policies.empty:
        out.append(("Traffic policies (servecap fleet)", [POLICY_NOTE, policies]))
    hedged = tables.hedge_table(summary)
    if not hedged.empty:
        out.append(("Hedged requests", [hedged]))
    sessions = tables.session_table(summary)
    if not sessions.empty:
        out.append(("Agentic sessions", [sessions]))
    turns = tables.turn_table(summary)
    if not turns.empty:
        out.append(("Latency by turn", [turns]))
    models = tables.model_table(summary)
    if not models.empty:
        out.append(("Latency by model", [*tables.slot_wait_sentences(summary), models]))
    out.append(("Figures", [fig for fig in figures if fig.name != ANSWER_FIGURE]))
    out.append(("Detail", [
        *[Details(f"Latency detail: {metric}", [tables.latency_table(summary, metric)])
          for metric in tables.LATENCY_COLUMNS],
        Details("Load-generator health per level", [tables.health_table(summary)]),
        Details("Server and device means per level", [tables.resources_table(summary)]),
    ]))
    return out


def to_markdown(title: str, parts: list[tuple[str, list[Block]]]) -> str:
    lines = [f"# {title}", ""]
    for heading, blocks in parts:
        lines += [f"## {heading}", ""]
        lines += _markdown_blocks(blocks)
    return "\n".join(lines)


def _markdown_blocks(blocks: list[Block]) -> list[str]:
    lines = []
    for block in blocks:
        if isinstance(block, Details):
            lines += [f"<details><summary>{html.escape(block.summary)}</summary>", ""]
            lines += _markdown_blocks(block.blocks)
            lines.append("</details>")
        elif isinstance(block, pd.DataFrame):
            lines.append(block.to_markdown(index=False) if not block.empty else "(no rows)")
        elif isinstance(block, FigureFile):
            lines.append(f"![{block.title}]({block.name})\n\n*{block.caption}*")
        else:
            lines.append(block)
        lines.append("")
    return lines


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f2f2f2}img{max-width:100%}figure{margin:1em 0}figcaption{font-size:13px;color:#555}
details{margin:.5em 0}summary{cursor:pointer;color:#333}"""


def _inline_markdown(text: str) -> str:
    """The Markdown the report's sentences use: `code`, **bold**, *italic*."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", escaped)


def to_html(title: str, parts: list[tuple[str, list[Block]]], figure_dir: Path) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for heading, blocks in parts:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        body += _html_blocks(blocks, figure_dir)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")


def _html_blocks(blocks: list[Block], figure_dir: Path) -> list[str]:
    body = []
    for block in blocks:
        if isinstance(block, Details):
            body.append(f"<details><summary>{html.escape(block.summary)}</summary>"
                        + "".join(_html_blocks(block.blocks, figure_dir)) + "</details>")
        elif isinstance(block, pd.DataFrame):
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
    return body
