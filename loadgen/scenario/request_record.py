"""A finished exchange as its record (contract.records.Record): what the load generator writes per request.

    record = request_record(outcome, prepared, route, level=..., phase=..., t_sched_unix=..., ...)

The outcome (loadgen.client.exchange.summarize) gives the timings, tokens and status; the prepared request
what was asked and where it belongs (a conversation, a session's step, a model); the route the arm and
slice of a compare run. Pure: the caller owns the clock and the sink.
"""

from __future__ import annotations

from contract.records import Record
from loadgen.client.exchange import Outcome
from loadgen.scenario.route import Prepared, Route


def request_record(outcome: Outcome, prepared: Prepared, route: Route, *, level: str, phase: str,
                   t_sched_unix: float | None, t_start_unix: float, queue_s: float | None, worker: str,
                   request_id: str, round: int | None, hedge: str | None = None,
                   hedge_delay_s: float | None = None) -> Record:
    scenario, session = route.scenario, prepared.session
    return Record(
        level=level, phase=phase, t_sched=t_sched_unix, t_start=t_start_unix, queue_s=queue_s,
        ttft_s=outcome.ttft_s, e2e_s=outcome.e2e_s, itl_s=outcome.itl_s,
        prompt_tokens=outcome.prompt_tokens, output_tokens=outcome.output_tokens,
        status=outcome.status, error=outcome.error, worker=worker, response_id=outcome.response_id,
        ttft_any_s=outcome.ttft_any_s, request_id=request_id, api=scenario.api,
        prompt_tokens_asked=prepared.prompt_tokens_asked, output_tokens_asked=prepared.output_tokens_asked,
        usage_from=outcome.usage_from, arm=route.arm, slice=route.slice, round=round, replica=outcome.replica,
        switch=route.switch() if route.switch else None,
        conversation_id=prepared.conversation_id, turn=prepared.turn,
        step=session.step if session else None, agent=session.agent if session else None,
        tool_wait_s=session.tool_wait_s if session else None, session_end=session.session_end if session else None,
        tool_calls=len(outcome.tool_calls) if session else None,
        model=prepared.model, protocol=getattr(scenario, "protocol", None),
        ttfa_s=outcome.ttfa_s, reasoning_tokens=outcome.reasoning_tokens, answer_tokens=outcome.answer_tokens,
        cached_tokens=outcome.cached_tokens, hedge=hedge, hedge_delay_s=hedge_delay_s,
    )
