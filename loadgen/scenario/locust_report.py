"""Finished requests into Locust's own stats (console, CSV, web UI) as separate entries."""

from __future__ import annotations

from gevent import GreenletExit

from servecap.contract.records import tpot_s


class RequestFailed(Exception):
    """Shown in Locust's failures table as '<status>: <message>'."""


def report_to_locust(request_event, api: str, outcome, pause=None) -> None:
    """Separate Locust stats entries: TTFT, TPOT, ITL (one per gap), E2E; failures under E2E.

    `pause` is called every 8 entries (Locust's stats cost ~15 us each); if the test stops
    during a pause the remaining entries are still fired, so stats and records agree.
    """
    entries: list[tuple[str, float, Exception | None, int]] = []
    if outcome.status != "ok":
        entries.append(("E2E", outcome.e2e_s or 0.0, RequestFailed(f"{outcome.status}: {outcome.error}"), 0))
    else:
        tokens = outcome.output_tokens or 0
        if outcome.ttft_s is not None:
            entries.append(("TTFT", outcome.ttft_s, None, 0))
            tpot = tpot_s(outcome.e2e_s, outcome.ttft_s, outcome.output_tokens)
            if tpot is not None:
                entries.append(("TPOT", tpot, None, 0))
        entries.extend(("ITL", gap, None, 0) for gap in outcome.itl_s)
        entries.append(("E2E", outcome.e2e_s or 0.0, None, tokens))
    killed = False
    for number, (name, seconds, exception, length) in enumerate(entries, start=1):
        request_event.fire(request_type=api, name=name, response_time=seconds * 1000.0,
                           response_length=length, exception=exception, context={})
        if pause is not None and not killed and number % 8 == 0:
            try:
                pause()
            except GreenletExit:
                killed = True
    if killed:
        raise GreenletExit
