"""The engine's record of what it did: a `StepRecord` per step, a `RequestRecord` per finished request.

    engine.add_request   -> request_added(id, t)          arrival
    engine.step          -> stepped(t_start, step_s, ...)  the step; for its requests: first scheduled,
                                                           first token, finish (-> a RequestRecord)
    engine.abort_request -> request_dropped(id)            no record
    engine.stats()       -> take()                         the records since the last take

Times are passed in (unix s), so this file reads no clock. Records wait here until taken (the
engine loop takes them with every step's stats and sends them to the serving process, which
keeps a bounded ring for GET /v1/engine/steps); an engine stepped by hand that never asks keeps
only the newest `MAX_PENDING` of each.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from engine_core.scheduling.batch_shape import BatchShape
from engine_core.scheduling.strategies.base import ScheduledBatch
from contract.engine_record import RequestRecord, StepRecord

MAX_PENDING = 1 << 16


class EngineRecords(NamedTuple):
    steps: tuple[StepRecord, ...] = ()
    requests: tuple[RequestRecord, ...] = ()


class _Milestones:
    __slots__ = ("arrival", "scheduled", "first_token")

    def __init__(self, arrival: float) -> None:
        self.arrival = arrival
        self.scheduled: float | None = None
        self.first_token: float | None = None


class StepRecorder:
    def __init__(self) -> None:
        self._live: dict[str, _Milestones] = {}
        self._steps: deque[StepRecord] = deque(maxlen=MAX_PENDING)
        self._requests: deque[RequestRecord] = deque(maxlen=MAX_PENDING)

    def request_added(self, request_id: str, t: float) -> None:
        self._live[request_id] = _Milestones(t)

    def request_dropped(self, request_id: str) -> None:
        self._live.pop(request_id, None)

    def stepped(self, t_start: float, step_s: float, shape: BatchShape, batch: ScheduledBatch, outputs: list,
                *, running: int, waiting: int, kv_blocks_used: int, idle_after: bool,
                accepted_tokens: int = 0, lora_loads: int = 0, lora_load_s: float = 0.0) -> None:
        """`outputs`: the step's StepOutputs (request_id, finished, finish_reason, token counts)."""
        t_end = t_start + step_s
        live = self._live
        for seq in batch.seqs:
            milestones = live.get(seq.request_id)
            if milestones is not None and milestones.scheduled is None:
                milestones.scheduled = t_start
        for out in outputs:
            milestones = live.get(out.request_id)
            if milestones is None:
                continue
            if milestones.first_token is None:
                milestones.first_token = t_end
            if out.finished:
                del live[out.request_id]
                seq = next(s for s in batch.seqs if s.request_id == out.request_id)
                self._requests.append(RequestRecord(
                    response_id=out.request_id, prompt_tokens=out.num_prompt_tokens,
                    output_tokens=out.num_output_tokens, t_arrival=milestones.arrival,
                    t_scheduled=milestones.scheduled, t_first_token=milestones.first_token, t_finish=t_end,
                    preemptions=seq.num_preemptions, cached_tokens=out.num_cached_prompt_tokens,
                    finish_reason=out.finish_reason or "", lora=seq.lora or "", lora_wait_s=seq.lora_wait_s,
                    kv_transfer_s=0.0 if seq.kv_received_at is None else seq.first_scheduled_time - seq.kv_received_at))
        self._steps.append(StepRecord(
            t_start=t_start, step_s=step_s, batch=shape.sequences, prefill_tokens=shape.prefill_tokens,
            decode_seqs=shape.decode_seqs, context_tokens=shape.context_tokens, running=running, waiting=waiting,
            kv_blocks_used=kv_blocks_used, preempted=len(batch.preempted), idle_after=idle_after,
            proposal_tokens=shape.proposal_tokens, accepted_tokens=accepted_tokens,
            lora_adapters=shape.lora_adapters, lora_tokens=shape.lora_tokens, lora_loads=lora_loads, lora_load_s=lora_load_s))

    def take(self) -> EngineRecords:
        if not self._steps and not self._requests:
            return EngineRecords()
        taken = EngineRecords(tuple(self._steps), tuple(self._requests))
        self._steps.clear()
        self._requests.clear()
        return taken

    def reset(self) -> None:
        """Forget everything (after warm-up: the record describes user traffic only)."""
        self._live.clear()
        self.take()
