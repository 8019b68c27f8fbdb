"""The four batching strategies as discrete-event loops over engine steps.

Time only moves by step durations from a ``StepTimeModel`` (and by idle waits for arrivals),
mirroring ``reference_server``'s schedulers:
  none / static / dynamic: form a batch (when nothing runs), prefill all prompts in one step, then
      decode one token per member per step; finished members leave, nobody joins until all are done.
  continuous: every step runs all running sequences (one decode token each, or a prefill chunk),
      then admits waiting requests while max_num_seqs, the token budget and KV blocks allow.
A request's first token comes at the end of the step that finishes its prompt. With a jittered
step model (``StepTimeModel.jitter``) every step draws its own factor from the measured spread.
Loops are O(steps + requests log requests); a closed-loop user sends again the moment its
previous request finishes.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from calculators.sim.state import Arrivals, StepClock, Trace
from calculators.sim.workload import ServerConfig


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def run_to_completion(cfg: ServerConfig, model: StepClock, trace: Trace, arrivals: Arrivals) -> None:
    """none / static / dynamic (see module docstring)."""
    waiting: deque[int] = deque()
    now, done, n = 0.0, 0, len(trace.prompt)
    while done < n:
        arrivals.pop_until(now, waiting)
        if not waiting:
            now = max(now, arrivals.next_time())
            continue
        size, deadline = _launch_size(cfg, len(waiting), now, float(trace.arrival[waiting[0]]))
        if size is None:
            upcoming = arrivals.next_time()
            now = deadline if upcoming is None else min(deadline, max(now, upcoming))
            continue
        members = [waiting.popleft()]
        reserved = _blocks(int(trace.prompt[members[0]] + trace.output[members[0]]), cfg.block_size)
        while waiting and len(members) < size:
            need = _blocks(int(trace.prompt[waiting[0]] + trace.output[waiting[0]]), cfg.block_size)
            if cfg.num_kv_blocks is not None and reserved + need > cfg.num_kv_blocks:
                break
            reserved += need
            members.append(waiting.popleft())
        now = _run_batch(np.asarray(members), model, trace, now, arrivals)
        done += len(members)


def _launch_size(cfg: ServerConfig, num_waiting: int, now: float, oldest_arrival: float):
    """(batch size or None to keep waiting, absolute time when the oldest request forces a launch)."""
    if cfg.strategy == "none":
        return 1, oldest_arrival
    if cfg.strategy == "static":
        deadline = oldest_arrival + cfg.batch_timeout_s
        if num_waiting >= cfg.batch_size or now >= deadline:
            return min(num_waiting, cfg.batch_size), deadline
        return None, deadline
    deadline = oldest_arrival + cfg.max_queue_delay_s
    if num_waiting >= cfg.max_batch_size:
        return cfg.max_batch_size, deadline
    reachable = [size for size in cfg.preferred_batch_sizes if size <= num_waiting]
    if reachable:
        return max(reachable), deadline
    return (num_waiting if now >= deadline else None), deadline


def _run_batch(members: np.ndarray, model: StepClock, trace: Trace, now: float, arrivals: Arrivals) -> float:
    """Prefill step, then decode steps in segments of constant batch size; returns the end time."""
    prompts, outputs = trace.prompt[members], trace.output[members]
    step = model.step(len(members), int(prompts.sum()), int(prompts.sum()))
    now += step
    trace.steps += 1
    trace.sequences_in_steps += len(members)
    trace.busy_s += step
    trace.first_token[members] = now
    order = np.argsort(outputs, kind="stable")
    alive, prompt_alive, j = len(members), int(prompts.sum()), 0   # j: decode steps done
    for idx in order:
        target = int(outputs[idx]) - 1          # decode steps this member needs
        if target > j:
            count = target - j                  # steps j+1 .. target with `alive` members
            per_ctx = model.model.per_context_token_s
            series = model.series(count, model.model.step_s(alive) + per_ctx * (prompt_alive + alive * j),
                                  per_ctx * alive)
            if series is None:
                context = count * prompt_alive + alive * (j + 1 + target) * count / 2
                duration = count * model.model.step_s(alive) + per_ctx * context
            else:
                duration = float(series.sum())
            now += duration
            trace.busy_s += duration
            trace.steps += count
            trace.sequences_in_steps += count * alive
            j = target
        member = int(members[idx])
        trace.end[member] = now
        arrivals.finished(now)
        alive -= 1
        prompt_alive -= int(trace.prompt[member])
    return now


def continuous(cfg: ServerConfig, model: StepClock, trace: Trace, arrivals: Arrivals, *,
               fast_forward: bool = True) -> None:
    """Iteration-level batching with chunked prefill (see module docstring). ``fast_forward`` takes
    stretches of pure decode steps in closed form; False steps one at a time (same answer, slower)."""
    waiting: deque[int] = deque()
    prefilling: deque[list[int]] = deque()      # [request, prompt tokens still to compute]
    finishing: list[tuple[int, int]] = []       # heap of (decode step count at which it ends, request)
    now, done, n = 0.0, 0, len(trace.prompt)
    decoding, context_sum, decode_steps, free_blocks = 0, 0, 0, cfg.num_kv_blocks
    while done < n:
        arrivals.pop_until(now, waiting)
        if not (decoding or prefilling or waiting):
            now = max(now, arrivals.next_time())
            continue
        if fast_forward and decoding and not prefilling and not waiting:   # decodes until a finish or arrival
            skipped, duration = _decode_run(model, decoding, context_sum, finishing[0][0] - decode_steps,
                                            arrivals.next_time(), now)
            now += duration
            trace.steps += skipped
            trace.sequences_in_steps += skipped * decoding
            trace.busy_s += duration
            decode_steps += skipped
            context_sum += skipped * decoding
            finished, freed_tokens, freed_blocks = _retire(finishing, decode_steps, now, cfg, trace, arrivals)
            done, decoding, context_sum = done + finished, decoding - finished, context_sum - freed_tokens
            if free_blocks is not None:
                free_blocks += freed_blocks
            continue
        budget = cfg.max_num_batched_tokens - decoding
        chunks: list[tuple[list[int], int]] = []
        for entry in prefilling:
            if budget <= 0:
                break
            take = min(entry[1], budget)
            chunks.append((entry, take))
            budget -= take
        while waiting and budget > 0 and decoding + len(prefilling) < cfg.max_num_seqs:
            request = waiting[0]
            if free_blocks is not None:
                need = _blocks(int(trace.prompt[request] + trace.output[request]), cfg.block_size)
                if need > free_blocks:
                    break
                free_blocks -= need
            waiting.popleft()
            entry = [request, int(trace.prompt[request])]
            prefilling.append(entry)
            take = min(entry[1], budget)
            chunks.append((entry, take))
            budget -= take
        prefill_tokens = sum(take for _, take in chunks)
        step = model.step(decoding + len(chunks), prefill_tokens, context_sum + decoding + prefill_tokens)
        now += step
        trace.steps += 1
        trace.sequences_in_steps += decoding + len(chunks)
        trace.busy_s += step
        decode_steps += 1
        context_sum += decoding
        finished, freed_tokens, freed_blocks = _retire(finishing, decode_steps, now, cfg, trace, arrivals)
        done, decoding, context_sum = done + finished, decoding - finished, context_sum - freed_tokens
        if free_blocks is not None:
            free_blocks += freed_blocks
        for entry, take in chunks:
            entry[1] -= take
            if entry[1]:
                continue
            prefilling.remove(entry)
            request = entry[0]
            trace.first_token[request] = now
            remaining = int(trace.output[request]) - 1
            if remaining == 0:
                done += _finish(request, now, trace, arrivals)
                if free_blocks is not None:
                    free_blocks += _blocks(int(trace.prompt[request] + trace.output[request]), cfg.block_size)
                continue
            heapq.heappush(finishing, (decode_steps + remaining, request))
            decoding += 1
            context_sum += int(trace.prompt[request]) + 1


def _decode_run(clock: StepClock, decoding: int, context_sum: int, until_finish: int,
                next_arrival: float | None, now: float) -> tuple[int, float]:
    """(steps, seconds) of a stretch of pure decode steps with a constant batch: up to the next finish,
    or to the first step that starts at or after the next arrival. Step j attends context_sum + j x decoding."""
    model = clock.model
    fixed = model.base_s + model.per_seq_s * decoding + model.per_context_token_s * context_sum
    growth = model.per_context_token_s * decoding
    series = clock.series(until_finish, fixed, growth)
    if series is not None:
        ends = np.cumsum(series)
        steps = until_finish
        if next_arrival is not None:
            steps = min(until_finish, int(np.searchsorted(ends, next_arrival - now, side="left")) + 1)
        return steps, float(ends[steps - 1])

    def total(m: int) -> float:
        return m * fixed + growth * m * (m + 1) / 2

    steps = until_finish
    if next_arrival is not None and total(until_finish) > next_arrival - now:
        low, high = 1, until_finish            # smallest m whose steps reach the arrival
        while low < high:
            mid = (low + high) // 2
            low, high = (mid + 1, high) if total(mid) < next_arrival - now else (low, mid)
        steps = low
    return steps, total(steps)


def _retire(finishing: list[tuple[int, int]], decode_steps: int, now: float, cfg: ServerConfig, trace: Trace,
            arrivals: Arrivals) -> tuple[int, int, int]:
    """Finish every decoding sequence whose last step has run by `decode_steps`.

    Returns (sequences finished, context tokens they held, KV blocks they held)."""
    finished = tokens = blocks = 0
    while finishing and finishing[0][0] <= decode_steps:
        _, request = heapq.heappop(finishing)
        finished += _finish(request, now, trace, arrivals)
        length = int(trace.prompt[request] + trace.output[request])
        tokens += length
        blocks += _blocks(length, cfg.block_size)
    return finished, tokens, blocks


def _finish(request: int, now: float, trace: Trace, arrivals: Arrivals) -> int:
    trace.end[request] = now
    arrivals.finished(now)
    return 1
