"""The "Token latency" tab in Locust's web UI, through its extension points (as Locust's
examples/extend_web_ui.py): `extended_tabs`/`extended_tables` in the page's template args,
the table's rows added to `/stats/requests` as `extended_stats`, and a Flask blueprint:

- `/servecap/tokens`        a page of its own: the same table and one chart per metric
                            (p50 and p95 over the last ~10 s, one point per 5 s), server-rendered
                            SVG that reloads itself; linked from the "Download Data" tab;
- `/servecap/tokens/csv`    `TokenStats` in Locust's requests-CSV columns;
- `/servecap/tokens/stats`  the rows and the chart history as JSON.
"""

from __future__ import annotations

import html
import io
import json

from flask import Blueprint, Response, request

from loadgen.scenario.token_stats import CHART_PERCENTILES, TokenStats
from loadgen.scenario.token_summary import tokens_csv

TAB_KEY = "servecap-tokens"
COLUMNS = [("type", "Type"), ("metric", "Metric"), ("count", "# values"), ("avg", "Average (ms)"),
           ("min", "Min (ms)"), ("p50", "p50 (ms)"), ("p90", "p90 (ms)"), ("p95", "p95 (ms)"),
           ("p99", "p99 (ms)"), ("max", "Max (ms)")]
CHART_W, CHART_H, PAD = 560, 180, 40
LINE_COLOURS = ("#1f77b4", "#d62728")


def install_token_tab(web_ui, tokens: TokenStats) -> None:
    web_ui.template_args["extended_tabs"] = [{"title": "Token latency", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": key, "title": title} for key, title in COLUMNS]}]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "./servecap/tokens/csv", "title": "Download token latency CSV (TTFT, TPOT, ITL, E2E)"},
        {"href": "./servecap/tokens", "title": "Token latency charts (TTFT, TPOT, ITL, E2E over time)"}]

    @web_ui.app.after_request
    def _add_rows(response: Response) -> Response:
        if request.path == "/stats/requests" and response.is_json:
            body = response.get_json()
            body["extended_stats"] = [{"key": TAB_KEY, "data": tokens.rows()}]
            response.set_data(json.dumps(body))
        return response

    blueprint = Blueprint("servecap_tokens", __name__)

    @blueprint.route("/servecap/tokens")
    def _page() -> Response:
        return Response(page_html(tokens), mimetype="text/html")

    @blueprint.route("/servecap/tokens/csv")
    def _csv() -> Response:
        handle = io.StringIO()
        tokens_csv(tokens, handle)
        return Response(handle.getvalue(), mimetype="text/csv",
                        headers={"Content-disposition": "attachment;filename=token_latency.csv"})

    @blueprint.route("/servecap/tokens/stats")
    def _stats() -> Response:
        return Response(json.dumps({"rows": tokens.rows(), "history": tokens.history}), mimetype="application/json")

    web_ui.app.register_blueprint(blueprint)


def page_html(tokens: TokenStats) -> str:
    rows = tokens.rows()
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(row[key]))}</td>" for key, _ in COLUMNS) + "</tr>"
                   for row in rows) or f'<tr><td colspan="{len(COLUMNS)}">no finished requests yet</td></tr>'
    charted = {key for point in tokens.history for key in point}
    series = [key for key in tokens.series() if key in charted]
    charts = "".join(chart_svg(tokens.history, key) for key in series) or "<p>Charts appear once a test runs.</p>"
    return f"""<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>Token latency - Locust</title><link rel="icon" href="data:,"><style>
body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} svg{{margin:6px;border:1px solid #eee}}
</style></head><body><h1>Token latency</h1>
<p>Per-token metrics, outside Locust's request counts: TTFT, TPOT and E2E once per ok request,
ITL once per gap between streamed chunks (ms, rounded as Locust rounds). <a href="../">Back to Locust</a></p>
<table id="token-table"><tr>{head}</tr>{body}</table>
<h2>Over time (last ~10 s percentiles)</h2><div id="token-charts">{charts}</div></body></html>"""


def chart_svg(history: list[dict], key: str) -> str:
    """One metric's p50/p95 lines over time; gaps (no value in the window) break nothing."""
    points = [(point["t"], point[key]) for point in history if key in point]
    values = [v for _, pcts in points for v in pcts.values() if v is not None]
    top = max(values, default=1) or 1
    t0, t1 = points[0][0], points[-1][0]
    span = (t1 - t0) or 1

    def xy(t, v):
        return PAD + (t - t0) / span * (CHART_W - 2 * PAD), CHART_H - PAD + 10 - v / top * (CHART_H - PAD - 10)

    lines = []
    for colour, percent in zip(LINE_COLOURS, CHART_PERCENTILES):
        name = f"p{round(percent * 100)}"
        coords = " ".join("%.1f,%.1f" % xy(t, pcts[name]) for t, pcts in points if pcts.get(name) is not None)
        lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>'
                     f'<text x="{CHART_W - PAD - 40}" y="{20 + 14 * len(lines)}" fill="{colour}">{name}</text>')
    return (f'<svg class="token-chart" width="{CHART_W}" height="{CHART_H}" role="img" '
            f'aria-label="{html.escape(key)} p50 and p95 over time">'
            f'<text x="{PAD}" y="16" font-weight="bold">{html.escape(key)} (ms)</text>'
            f'<text x="4" y="{CHART_H - PAD + 14}">0</text><text x="4" y="24">{top:g}</text>'
            f'<text x="{PAD}" y="{CHART_H - 8}">{span:.0f} s</text>{"".join(lines)}</svg>')
