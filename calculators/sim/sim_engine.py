"""The engine's step loop with a step-time model in place of the model runner.

    schedule (the real scheduler)  ->  step time (StepClock)  ->  postprocess (shared with the engine)

The scheduler is the class the engine runs for the strategy (from the registry in
``reference_server.scheduling.strategies``) over a real ``BlockManager``, and ``postprocess`` is
the engine's own bookkeeping (tokens computed, one token appended, finish at max_tokens), so
batching rules, KV-limited admission and preemption are the engine's by construction. Only
time is modelled: a step lasts ``StepClock.step(sequences, prefill tokens, context tokens)``;
when nothing may run, time jumps to the next arrival or to the moment a batch may launch.
A request's first token comes at the end of the step that finishes its prompt.

Prompts are distinct per request (request i's prompt is token i repeated), so requests never
share prefix-cache blocks (like random prompts); a preempted request that is recomputed may
hit its own blocks still in the cache, as in the engine.
"""

from __future__ import annotations

import math

from calculators.sim.state import Arrivals, StepClock, Trace
from calculators.sim.workload import ServerConfig
from reference_server.scheduling.block_manager import BlockManager, cdiv
from reference_server.scheduling.postprocess import StopRule, postprocess, samples_token
from reference_server.scheduling.sampling import SamplingParams
from reference_server.scheduling.sequence import Sequence
from reference_server.scheduling.strategies import make_scheduler

SIM_TOKEN = 1          # what every simulated step samples; with ignore_eos only max_tokens ends a request
NO_STOP = StopRule()   # no end-of-sequence token, no context limit


def num_kv_blocks(server: ServerConfig, trace: Trace) -> int:
    """The configured cache, which must hold the longest request; unset: room for `max_running`
    longest requests (no strategy ever waits for blocks then)."""
    worst = cdiv(int((trace.prompt + trace.output).max()), server.block_size)
    if server.num_kv_blocks is None:
        return worst * min(server.limits.max_running, len(trace.prompt))
    if worst > server.num_kv_blocks:
        raise ValueError(f"num_kv_blocks ({server.num_kv_blocks}) cannot hold the longest request "
                         f"({worst} blocks of {server.block_size} tokens)")
    return server.num_kv_blocks


def run_engine(server: ServerConfig, clock: StepClock, trace: Trace, arrivals: Arrivals) -> None:
    """Fill `trace` (first-token and end times, step counters) for every request of the run."""
    scheduler = make_scheduler(server.limits, BlockManager(num_kv_blocks(server, trace), server.block_size))
    prompt, output, arrival = trace.prompt.tolist(), trace.output.tolist(), trace.arrival
    first_token, end = [math.nan] * len(prompt), [math.nan] * len(prompt)
    arrived: list[int] = []
    now, done, n = 0.0, 0, len(prompt)
    steps = sequences = preemptions = 0
    busy = 0.0
    while done < n:
        arrivals.pop_until(now, arrived)
        for i in arrived:
            scheduler.add(Sequence(str(i), [i] * prompt[i], SamplingParams(max_tokens=output[i], ignore_eos=True),
                                   arrival_time=float(arrival[i])))
        arrived.clear()
        batch = scheduler.schedule(now)
        if batch is None:
            now = _next_event(now, scheduler.seconds_until_schedulable(now), arrivals.next_time(), server)
            continue
        tokens: list[int | None] = []
        prefill = context = 0
        for seq, count in zip(batch.seqs, batch.num_new_tokens):
            sampling = samples_token(seq, count)
            tokens.append(SIM_TOKEN if sampling else None)
            context += seq.num_computed_tokens + count            # keys attended after this step
            if count > 1 or seq.num_computed_tokens < seq.num_prompt_tokens:   # all but decodes
                prefill += count
        size = len(batch.seqs)
        duration = clock.step(size, prefill, context)
        now += duration
        steps, sequences, busy, preemptions = steps + 1, sequences + size, busy + duration, preemptions + len(batch.preempted)
        for seq, _, reason in postprocess(scheduler, batch, tokens, NO_STOP):
            produced = seq.num_output_tokens
            if reason is None and produced > 1:
                continue   # a decode: nothing to record
            i = int(seq.request_id)
            if produced == 1:
                first_token[i] = now
            if reason is not None:
                end[i] = now
                arrivals.finished(now)
                done += 1
    trace.first_token[:], trace.end[:] = first_token, end
    trace.steps, trace.sequences_in_steps, trace.busy_s, trace.preemptions = steps, sequences, busy, preemptions


def _next_event(now: float, wait_s: float | None, next_arrival: float | None, server: ServerConfig) -> float:
    """Idle: the earlier of the next arrival and the moment the scheduler may launch a batch."""
    if wait_s == 0.0 or (wait_s is None and next_arrival is None):
        raise RuntimeError(f"simulator stalled: the {server.strategy} scheduler runs nothing "
                           f"({'but says it could' if wait_s == 0.0 else 'and no request is coming'})")
    target = min(t for t in (None if wait_s is None else now + wait_s, next_arrival) if t is not None)
    return target if target > now else math.nextafter(now, math.inf)
