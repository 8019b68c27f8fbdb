"""Finished requests into Locust's own stats: one request event per real request.

The event's response time is the request's E2E and its length the output tokens; a failure
is the event's exception ("<status>: <message>"). So the web UI's RPS, failures and
"Aggregated" row, the console and `--csv` count requests, once each. The per-token metrics
(TTFT, TPOT, every ITL gap, E2E) go to `TokenStats`, outside the request events.
"""

from __future__ import annotations

from gevent import GreenletExit

from loadgen.scenario.token_stats import TokenStats


class RequestFailed(Exception):
    """Shown in Locust's failures table as '<status>: <message>'."""


def report_to_locust(request_event, tokens: TokenStats, api: str, path: str, outcome, arm: str | None = None,
                     pause=None) -> None:
    """Fire the request's one event (named by its path, "a: /v1/..." in a compare run's arm a)
    and log its token metrics. `pause` is called now and then
    while a long stream's gaps are logged; if the test stops during a pause, the rest is still
    logged (stats and records agree), then the greenlet dies."""
    label = f"{arm}: " if arm else ""
    failed = outcome.status != "ok"
    request_event.fire(request_type=api, name=f"{label}{path}", response_time=(outcome.e2e_s or 0.0) * 1000.0,
                       response_length=0 if failed else outcome.output_tokens or 0,
                       exception=RequestFailed(f"{outcome.status}: {outcome.error}") if failed else None,
                       context={})
    if failed:
        return
    killed = False

    def guarded_pause() -> None:
        nonlocal killed
        if pause is not None and not killed:
            try:
                pause()
            except GreenletExit:
                killed = True

    tokens.log(api, outcome, label=label, pause=guarded_pause)
    if killed:
        raise GreenletExit
