"""One simulated replica on a fleet's shared clock: the engine's own scheduler, stepped as far as asked.

    replica = ReplicaSim(server, step_model, num_kv_blocks=..., seed=..., ready_at=t)
    replica.submit(i, prompt_token_ids, output_tokens, t)   # the router sent request i at t
    replica.advance(until)                                   # run every step that starts before `until`
    replica.advance(until, one_step=True)                    # at most the one step that starts now
    replica.abort(i)                                         # request i leaves now (a hedge's loser)
    replica.ended / replica.first_tokens                     # (i, t) pairs since the caller last drained them
    replica.gauges(t)                                        # what its /metrics shows at t

The step loop is `calculators.sim.sim_engine.run_engine`'s (the strategy's real scheduler over a real
`BlockManager`, the engine's `postprocess`, `StepClock` for durations, the steady-decode fast path), cut
so that a fleet can interleave replicas: a replica never looks past `until`, because a request the
router has not yet placed may still arrive there. Between `advance` calls nothing changes, so a replica
whose next step starts after the fleet's next event costs nothing until then.

What a replica's /metrics shows (`gauges`) is its state as the last step that ended left it, not its
state mid-step: an engine sets its running and waiting gauges and its KV share after each step (vLLM's
scheduler attaches `make_stats()` to a step's outputs in `Scheduler.update_from_output`, and its
Prometheus logger sets vllm:num_requests_running/waiting from them; the reference server's
`observe_step` likewise). A request that reaches it during a step is counted when the next step ends,
so while a long prefill runs, the requests it is prefilling and those that came meanwhile are not yet
seen, and an autoscaler reading then sees the load of a step ago.

Prompts are token lists, so requests that share leading tokens share KV blocks in the prefix cache,
as on a real replica behind a prefix-aware router.
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import numpy as np

from calculators.sim.sim_engine import MAX_FAST_STEPS, NO_STOP, SHORT_RUN, SIM_TOKEN
from calculators.sim.state import StepClock
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from engine_core.scheduling.batch_shape import batch_shape
from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.lora_slots import LoraSlots
from engine_core.scheduling.postprocess import postprocess
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.steady_decode import advance_decodes, is_steady, plan_steady_run
from engine_core.scheduling.strategies import make_scheduler


class Gauges(NamedTuple):
    """A replica's /metrics as one step's end left them (module doc)."""

    t_s: float          # when that step ended
    running: int
    waiting: int
    kv_usage: float     # blocks in use over all blocks


class ReplicaSim:
    """A replica that is ready at `ready_at` (s, the fleet's clock). `ended` and `first_tokens` collect
    (request index, time) as steps finish them; the caller drains them."""

    def __init__(self, server: SimServer, step_model: StepTimeModel, *, num_kv_blocks: int, seed: int = 0,
                 ready_at: float = 0.0, rng: np.random.Generator | None = None, shared_prefixes: bool = True) -> None:
        self.block_manager = BlockManager(num_kv_blocks, server.block_size, shared_prefixes=shared_prefixes)
        self.scheduler = make_scheduler(server.limits, self.block_manager)
        self.lora = server.lora   # LoRA slots and step costs (calculators.sim.lora_step), or None
        if self.lora is not None:
            self.scheduler.lora_slots = LoraSlots(self.lora.max_loras)
        self.clock = StepClock(step_model, rng if rng is not None else np.random.default_rng(seed))
        self.now = float(ready_at)
        self.ended: list[tuple[int, float]] = []
        self.first_tokens: list[tuple[int, float]] = []
        self.steps = 0
        self.sequences_in_steps = 0   # sum over steps of the sequences in each (its mean batch)
        self.busy_s = 0.0
        self.preemptions = 0
        # the gauges as the last few steps left them: a read at t takes the last that ended by t
        self._published: deque[Gauges] = deque([Gauges(self.now, 0, 0, 0.0)], maxlen=4)

    # -- what the router and the autoscaler read ------------------------------------------------
    @property
    def running(self) -> int:
        return len(self.scheduler.running)

    @property
    def waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def kv_usage(self) -> float:
        return self.block_manager.num_used_blocks / self.block_manager.num_blocks

    def gauges(self, t: float) -> Gauges:
        """What its /metrics shows at `t` (advanced to `t` first): the gauges of the last step that ended by
        then (the module doc)."""
        shown = self._published[0]
        for gauges in self._published:
            if gauges.t_s <= t:
                shown = gauges
        return shown

    def _publish(self) -> None:
        scheduler = self.scheduler
        self._published.append(Gauges(self.now, len(scheduler.running), len(scheduler.waiting), self.kv_usage))

    def unfinished(self) -> list[int]:
        """Request indices still here (running, then waiting): what a killed replica loses."""
        return [int(seq.request_id) for seq in (*self.scheduler.running, *self.scheduler.waiting)]

    # -- driving it --------------------------------------------------------------------------------
    def submit(self, i: int, prompt_token_ids: list[int], output_tokens: int, t: float,
               lora: str | None = None, kv_transfer_s: float | None = None) -> None:
        """Request `i` reaches this replica at `t` (the engine sees it at its next step); `lora`: its adapter;
        `kv_transfer_s`: a disaggregated decode worker's request, whose prompt's KV arrives over that long
        once its blocks are allocated (every prompt token but the last is received, not computed)."""
        seq = Sequence(str(i), prompt_token_ids, SamplingParams(max_tokens=int(output_tokens), ignore_eos=True),
                       arrival_time=t, lora=lora if self.lora is not None else None)
        seq.kv_transfer_s = kv_transfer_s
        self.scheduler.add(seq)
        if self.now < t:   # idle until now: the clock catches up with the request
            self.now = t

    def abort(self, i: int) -> bool:
        """Request `i` leaves at the current step boundary, its blocks freed (a client that closed its
        connection: the engine aborts it before its next step). False: it is not here."""
        return self.scheduler.abort(str(i)) is not None

    def advance(self, until: float, one_step: bool = False) -> None:
        """Run the steps that start before `until`; an idle replica's clock moves to `until`. `one_step`:
        stop after one step (no steady stretch), so that a caller racing two replicas sees every first token
        in time order (calculators.plan.hedge_races)."""
        scheduler, clock = self.scheduler, self.clock
        while self.now < until:
            batch = scheduler.schedule(self.now)
            if batch is None:
                clock.idle()
                wait = scheduler.seconds_until_schedulable(self.now)
                if wait is None or not scheduler.has_unfinished():
                    self.now = until
                    return
                self.now = min(until, self.now + wait) if wait > 0 else math.nextafter(self.now, math.inf)
                continue
            shape = batch_shape(batch)
            tokens = [SIM_TOKEN if seq.num_computed_tokens + count == len(seq.token_ids) else None
                      for seq, count in zip(batch.seqs, batch.num_new_tokens)]
            extra_s = 0.0
            if self.lora is not None:   # the step's adapters take their slots (cold ones loaded), as the engine's
                loaded = scheduler.lora_slots.activate([seq.lora for seq in batch.seqs]).loaded
                extra_s = self.lora.extra_s(shape, len(loaded))
            clock.now = self.now
            duration = clock.step(shape.sequences, shape.prefill_tokens, shape.context_tokens, extra_s)
            self.now += duration
            self.steps += 1
            self.sequences_in_steps += shape.sequences
            self.busy_s += duration
            self.preemptions += len(batch.preempted)
            finished = 0
            for seq, _, reason in postprocess(scheduler, batch, tokens, NO_STOP):
                produced = len(seq.token_ids) - seq.num_prompt_tokens
                if reason is None and produced > 1:
                    continue
                i = int(seq.request_id)
                if produced == 1:
                    self.first_tokens.append((i, self.now))
                if reason is not None:
                    finished += 1
                    self.ended.append((i, self.now))
            self._publish()
            if one_step:
                return
            if self.lora is None and is_steady(scheduler, batch, finished):   # LoRA steps are not alike
                size = shape.sequences - finished
                context = shape.context_tokens - sum(len(seq.token_ids) - 1 for seq in batch.seqs
                                                     if seq.finish_reason) if finished else shape.context_tokens
                self._steady_stretch(size, context, until)

    def _steady_stretch(self, size: int, context: int, stop_at: float) -> None:
        """The steady decode steps that start before `stop_at`, at once (`sim_engine._steady_stretch`)."""
        scheduler, clock = self.scheduler, self.clock
        run = plan_steady_run(scheduler, NO_STOP, SIM_TOKEN, MAX_FAST_STEPS)
        if run.steps == 0 or not self.now < stop_at:
            return
        if run.steps < SHORT_RUN:
            ran = 0
            while ran < run.steps and self.now < stop_at:
                ran += 1
                clock.now = self.now
                duration = clock.step(size, 0, context + ran * size)
                self.now += duration
                self.busy_s += duration
        else:
            clock.now = self.now
            durations = clock.decode_durations(size, context + size, run.steps)
            ends = np.add.accumulate(np.concatenate(([self.now], durations)))
            ran = int(np.searchsorted(ends[:-1], stop_at, side="left"))
            clock.consume(ran)
            self.now = float(ends[ran])
            self.busy_s += float(durations[:ran].sum())
        self.steps += ran
        self.sequences_in_steps += size * ran
        for seq in advance_decodes(scheduler, run, ran, SIM_TOKEN, NO_STOP):
            i = int(seq.request_id)
            self.ended.append((i, self.now))
        if ran:
            self._publish()
