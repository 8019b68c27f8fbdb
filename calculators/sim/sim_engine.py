"""The engine's step loop with a step-time model in place of the model runner.

    schedule (the real scheduler)  ->  step time (StepClock)  ->  postprocess (shared with the engine)

The scheduler is the class the engine runs for the strategy (from the registry in
``engine_core.scheduling.strategies``) over a real ``BlockManager``, and ``postprocess`` is
the engine's own bookkeeping (tokens computed, one token appended, finish at max_tokens), so
batching rules, KV-limited admission and preemption are the engine's by construction. Only
time is modelled: a step lasts ``StepClock.step(sequences, prefill tokens, context tokens)``
(counted by ``batch_shape``, as the engine's step record counts them); when nothing may run,
time jumps to the next arrival or to the moment a batch may launch (and the clock hears of the wait:
the steps after it take the model's warm-up). A request's first token
comes at the end of the step that finishes its prompt; a reasoning model's first answer token at the end
of the step that makes its output token `reasoning + 1` (``Trace.reasoning``).

Fast path: after a steady step (``engine_core.scheduling.steady_decode``: the same batch of
decodes will repeat until something arrives, finishes or runs out of blocks), the following
steady steps run at once: their durations in one array, the scheduler advanced by
``advance_decodes``, stopping before the next arrival and the horizon. Durations, token counts,
block tables and the jitter draws come out the same as stepping (tests compare both, float for float).

Prompts are distinct per request (request i's prompt is token i repeated), so requests never
share prefix-cache blocks (like random prompts); a preempted request that is recomputed may
hit its own blocks still in the cache, as in the engine. A trace with ``token_ids`` (agentic
sessions, ``calculators.sim.sessions``) gives each request its prompt ids, filled as it is sent: the
block manager then registers every full block and a returning request finds what is still cached;
each request's hits at admission go to ``Trace.cached``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from calculators.sim.state import Arrivals, StepClock, Trace
from calculators.sim.workload import SimServer
from engine_core.scheduling.batch_shape import BatchShape, batch_shape
from engine_core.scheduling.block_manager import BlockManager, cdiv
from engine_core.scheduling.lora_slots import LoraSlots
from engine_core.scheduling.postprocess import StopRule, postprocess, samples_token
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.steady_decode import advance_decodes, is_steady, plan_steady_run
from engine_core.scheduling.strategies import make_scheduler

SIM_TOKEN = 1          # what every simulated step samples; with ignore_eos only max_tokens ends a request
NO_STOP = StopRule()   # no end-of-sequence token, no context limit
SHORT_RUN = 16         # steady stretches shorter than this take the per-step clock (an array costs more)
MAX_FAST_STEPS = 1 << 14


def num_kv_blocks(server: SimServer, trace: Trace) -> int:
    """The configured cache, which must hold the longest request; unset: room for `max_running`
    longest requests (no strategy ever waits for blocks then)."""
    longest = trace.longest if trace.longest is not None else int((trace.prompt + trace.output).max())
    worst = cdiv(longest, server.block_size)
    if server.num_kv_blocks is None:
        return worst * min(server.limits.max_running, len(trace.prompt))
    if worst > server.num_kv_blocks:
        raise ValueError(f"num_kv_blocks ({server.num_kv_blocks}) cannot hold the longest request "
                         f"({worst} blocks of {server.block_size} tokens)")
    return server.num_kv_blocks


def run_engine(server: SimServer, clock: StepClock, trace: Trace, arrivals: Arrivals, *,
               horizon_s: float = math.inf, fast_decodes: bool = True,
               on_step: Callable[[float, float, BatchShape], None] | None = None, seed: int = 0) -> None:
    """Fill `trace` (first-token and end times, step counters) for every request of the run, or for
    those that finish before `horizon_s` (engine time; the run stops there). `on_step(start, duration,
    shape)` hears of every step, as an engine's step record would (it turns the fast path off). With
    `server.speculative`, every decode proposes and keeps what seeded draws (`seed`) say, and a step
    lasts its verification and draft too; the fast path is off (steps are no longer alike). With
    `server.lora`, requests carry the adapters `trace.lora` names, wait for the engine's slots, and a step
    lasts what its adapters add (`calculators.sim.lora_step`); the fast path is off too."""
    speculative, lora = server.speculative, server.lora
    fast_decodes = fast_decodes and on_step is None and speculative is None and lora is None
    # distinct prompts: full blocks are hashed only when a preemption frees them (the same hits, fewer hashes)
    ids_of = trace.token_ids
    scheduler = make_scheduler(server.limits, BlockManager(num_kv_blocks(server, trace), server.block_size,
                                                           shared_prefixes=ids_of is not None))
    cached = None if ids_of is None else [0] * len(trace.prompt)
    adapters = trace.lora if lora is not None and trace.lora is not None else None
    if lora is not None:
        scheduler.lora_slots = LoraSlots(lora.max_loras)
    draws = None
    if speculative is not None:
        scheduler.proposer = speculative.proposer(seed)
        draws = speculative.draws(seed)
    prompt, output, arrival = trace.prompt.tolist(), trace.output.tolist(), trace.arrival
    first_token, end = [math.nan] * len(prompt), [math.nan] * len(prompt)
    # a reasoning model's answer starts at output token reasoning + 1 (a decode like the others): with
    # none, it is the first token, and the decodes need not be looked at
    reasoning = trace.reasoning.tolist()
    reasons = any(reasoning) or ids_of is not None   # a session's tool call shows at its name (filled as sent)
    first_answer = [math.nan] * len(prompt)
    arrived: list[int] = []
    now, done, n = 0.0, 0, len(prompt)
    steps = sequences = preemptions = 0
    busy = 0.0
    while done < n and now < horizon_s:
        arrivals.pop_until(now, arrived)
        for i in arrived:
            if ids_of is None:
                ids, max_tokens = [i] * prompt[i], output[i]
            else:   # filled as it was sent: its own prompt ids and length
                ids, max_tokens = ids_of[i], int(trace.output[i])
                output[i], reasoning[i] = max_tokens, int(trace.reasoning[i])
            scheduler.add(Sequence(str(i), ids, SamplingParams(max_tokens=max_tokens, ignore_eos=True),
                                   arrival_time=float(arrival[i]), lora=None if adapters is None else adapters[i]))
        arrived.clear()
        batch = scheduler.schedule(now)
        if batch is None:
            clock.idle()
            now = _next_event(now, scheduler.seconds_until_schedulable(now), arrivals.next_time(), server)
            continue
        shape = batch_shape(batch)
        tokens = [SIM_TOKEN if samples_token(seq, count) else None for seq, count in zip(batch.seqs, batch.num_new_tokens)]
        extra_s = 0.0
        if speculative is not None:   # a verification keeps the drawn count of proposals, then one of its own
            tokens = [[SIM_TOKEN] * (draws.accepted(len(seq.spec_token_ids)) + 1) if seq.spec_token_ids else token
                      for seq, token in zip(batch.seqs, tokens)]
            extra_s = speculative.extra_s(clock.model, shape)
        if lora is not None:   # the step's adapters take their slots (the cold ones loaded) and their products
            loaded = scheduler.lora_slots.activate([seq.lora for seq in batch.seqs]).loaded
            extra_s += lora.extra_s(shape, len(loaded))
        clock.now = now
        duration = clock.step(shape.sequences, shape.prefill_tokens, shape.context_tokens, extra_s)
        if on_step is not None:
            on_step(now, duration, shape)
        now += duration
        steps, sequences, busy, preemptions = (steps + 1, sequences + shape.sequences, busy + duration,
                                               preemptions + len(batch.preempted))
        finished = 0
        for seq, _, reason in postprocess(scheduler, batch, tokens, NO_STOP):
            produced = len(seq.token_ids) - seq.num_prompt_tokens
            if reasons and produced > 0:
                i = int(seq.request_id)
                if produced > reasoning[i] and math.isnan(first_answer[i]):
                    first_answer[i] = now
            if reason is None and produced > 1:
                continue   # a decode: nothing else to record
            i = int(seq.request_id)
            if math.isnan(first_token[i]):   # its first token (a verification may bring several at once)
                first_token[i] = now
                if cached is not None:
                    cached[i] = seq.num_cached_tokens
                if not reasons:
                    first_answer[i] = now
            if reason is not None:
                finished += 1
                end[i] = now
                arrivals.finished(i, now)
                done += 1
        if fast_decodes and is_steady(scheduler, batch, finished):
            size = shape.sequences - finished
            # the last step's context less the finished ones' (their blocks are gone: count their tokens)
            context = shape.context_tokens - sum(len(seq.token_ids) - 1 for seq in batch.seqs if seq.finish_reason) \
                if finished else shape.context_tokens
            before = [(int(seq.request_id), len(seq.token_ids) - seq.num_prompt_tokens)
                      for seq in scheduler.running] if reasons else ()
            ran, now, busy, ended, step_ends = _steady_stretch(scheduler, clock, size, context, now, busy,
                                                               min(arrivals.next_time() or math.inf, horizon_s))
            for i, produced in before:   # the stretch's step that made token reasoning + 1, if it ran
                k = reasoning[i] - produced   # steps before that one
                if 0 <= k < ran and math.isnan(first_answer[i]):
                    first_answer[i] = step_ends[k]
            steps, sequences = steps + ran, sequences + ran * size
            for seq in ended:
                i = int(seq.request_id)
                end[i] = now
                arrivals.finished(i, now)
                done += 1
    trace.first_token[:], trace.end[:], trace.first_answer[:] = first_token, end, first_answer
    if cached is not None:
        trace.cached = np.asarray(cached, dtype=np.int64)
    trace.steps, trace.sequences_in_steps, trace.busy_s, trace.preemptions = steps, sequences, busy, preemptions


def _steady_stretch(scheduler, clock: StepClock, size: int, context: int, now: float, busy: float,
                    stop_at: float) -> tuple[int, float, float, list, list[float]]:
    """Run the steady steps that start before `stop_at` (`context`: what the last step attended);
    (steps run, now, busy, the sequences the last of them finished, when each step ended)."""
    run = plan_steady_run(scheduler, NO_STOP, SIM_TOKEN, MAX_FAST_STEPS)
    if run.steps == 0 or not now < stop_at:
        return 0, now, busy, [], []
    if run.steps < SHORT_RUN:   # a few steps: the per-step clock, as stepping calls it
        ran, step_ends = 0, []
        while ran < run.steps and now < stop_at:
            ran += 1
            clock.now = now
            duration = clock.step(size, 0, context + ran * size)
            now += duration
            busy += duration
            step_ends.append(now)
    else:   # step j (0-based) attends `context` + (j + 1) x size: each sequence one token further
        clock.now = now
        durations = clock.decode_durations(size, context + size, run.steps)
        ends = np.add.accumulate(np.concatenate(([now], durations)))   # ends[j] = start of step j, as stepping adds
        ran = int(np.searchsorted(ends[:-1], stop_at, side="left"))    # steps starting strictly before stop_at
        clock.consume(ran)
        now = float(ends[ran])
        busy = float(np.add.accumulate(np.concatenate(([busy], durations[:ran])))[-1])
        step_ends = ends[1:ran + 1]
    return ran, now, busy, advance_decodes(scheduler, run, ran, SIM_TOKEN, NO_STOP), step_ends


def _next_event(now: float, wait_s: float | None, next_arrival: float | None, server: SimServer) -> float:
    """Idle: the earlier of the next arrival and the moment the scheduler may launch a batch."""
    if wait_s == 0.0 or (wait_s is None and next_arrival is None):
        raise RuntimeError(f"simulator stalled: the {server.strategy} scheduler runs nothing "
                           f"({'but says it could' if wait_s == 0.0 else 'and no request is coming'})")
    target = min(t for t in (None if wait_s is None else now + wait_s, next_arrival) if t is not None)
    return target if target > now else math.nextafter(now, math.inf)
