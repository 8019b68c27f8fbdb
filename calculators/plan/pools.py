"""Requests through a topology's pools of replicas, as vLLM's router spreads them (`run_pools`), with workers
killed on the way.

Each pool is a set of replicas (`calculators.plan.replica.ReplicaSim`: the strategy's real scheduler and
block manager on a step-time clock) fed in time order. Its router picks by round robin: a counter over the
workers the pool has when the request arrives (vllm-router's `round_robin` policy; a removed worker leaves
the list, and the count goes on over the rest). In the disaggregated mode (`--vllm-pd-disaggregation`)
the router picks a request's prefill worker and its decode worker together when the request arrives, each
pool by its own counter, then sends the prefill worker a one-token copy, waits for its whole answer and
sends the decode worker the request. Prefill workers never depend on decode workers, so the prefill pool
runs over the whole arrival schedule first and its answers, `hop_s` later, reach the decode workers.

A worker killed at T (`kills`: worker id -> T, prefill workers 0..P-1 and decode workers P..P+D-1; the
fleet's controller takes it out of the router, then kills it) fails what depends on it, as the router and
the emulated workers do (measured behind vllm-router 0.1.17; nothing is retried):
- a prefill worker: the requests it holds at T fail at T (the router's prefill call breaks: a 500); a
  request whose prompt it prefilled fails when its decode worker asks it to release the KV at or after T
  (a 503 `kv_transfer_failed`, `reference_server.api.kv_transfer`), at the handoff;
- a decode worker: the requests it holds at T fail at T (a stream cut mid-way); a request already paired
  with it whose handoff comes at or after T fails then (the router's decode call is refused: a 500);
- requests that arrive from T on are spread over the workers left; none left: they fail as they arrive
  (the router's 503 "No available workers").
A killed worker is not replaced: the router's PD mode adds no worker while it runs (its `/add_worker`
answers 400 "PD router requires specific add_prefill_server or add_decode_server methods").

What is not modelled: a prefill worker holds a sent prompt's blocks until the decode worker has read them
(here they are free at its answer), and the link is not shared between transfers. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calculators.plan.replica import ReplicaSim
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer


@dataclass(frozen=True)
class PoolsRun:
    """Per request (in send order): first token and end (s; NaN: never), the worker that answered it
    (aggregated: its replica, 0..N-1; disaggregated: its decode worker, P..P+D-1, after the prefill workers
    0..P-1; -1: none), when it failed (NaN: it did not), the prefill worker it was sent to (disaggregated;
    -1: none); and the workers' steps."""

    first_token: np.ndarray
    end: np.ndarray
    worker: np.ndarray
    steps: int
    busy_s: float
    sequences_in_steps: int
    preemptions: int
    failed_s: np.ndarray | None = None
    prefill_worker: np.ndarray | None = None


def run_pools(server: SimServer, step_model: StepTimeModel, topology, send_s: np.ndarray,
              prompt: np.ndarray, output: np.ndarray, *, kv=None, hop_s: float = 0.0,
              seed: int = 0, kills: dict[int, float] | None = None) -> PoolsRun:
    """Requests sent at `send_s` (sorted) through `topology` (calculators.plan.topology.Topology), every one
    to its end or its failure (module docstring); `kills` on a disaggregated topology only."""
    n = len(send_s)
    kills = dict(kills or {})
    if kills and not topology.disaggregated:
        raise ValueError("workers are killed in a disaggregated topology's pools here (an aggregated fleet's "
                         "faults are calculators.plan.fleet's)")
    for worker, t in kills.items():
        if not 0 <= worker < topology.workers:
            raise ValueError(f"no worker {worker} to kill in {topology}: its workers are 0 to {topology.workers - 1}")
        if not (t >= 0 and math.isfinite(t)):
            raise ValueError(f"a worker is killed at a time >= 0, got {t!r}")
    failed = np.full(n, np.nan)
    if not topology.disaggregated:
        last = RoundRobinPool(server, step_model, topology.replicas, seed)
        last.run(send_s, prompt, output)
        return _pools_run((last,), last, 0, n, failed, None)
    prefill_kills = {w: t for w, t in kills.items() if w < topology.prefill}
    decode_kills = {w - topology.prefill: t for w, t in kills.items() if w >= topology.prefill}
    prefill = RoundRobinPool(server, step_model, topology.prefill, seed)
    prefill.run(send_s, prompt, np.ones(n, dtype=np.int64), picks=round_robin_picks(send_s, topology.prefill,
                                                                                    prefill_kills),
                kills=prefill_kills)
    np.fmin(failed, prefill.failed(n), out=failed)
    handed = prefill.end(n) + hop_s   # the decode worker's arrivals: the prefill answer, then the hop
    source = prefill.worker(n)
    for worker, t in prefill_kills.items():   # the decode worker's release of the KV finds its worker gone
        gone = (source == worker) & (handed >= t)
        failed[gone], handed[gone] = handed[gone], np.nan
    decode = RoundRobinPool(server, step_model, topology.decode, seed + 1)
    sent = np.flatnonzero(np.isfinite(handed))
    decode.run(handed, prompt, output, order=sent[np.argsort(handed[sent], kind="stable")], kv=kv,
               picks=round_robin_picks(send_s, topology.decode, decode_kills), kills=decode_kills)
    np.fmin(failed, decode.failed(n), out=failed)
    return _pools_run((prefill, decode), decode, topology.prefill, n, failed, source)


def _pools_run(pools: tuple, last: RoundRobinPool, offset: int, n: int, failed: np.ndarray,
               prefill_worker: np.ndarray | None) -> PoolsRun:
    worker = last.worker(n)
    answered = np.isnan(failed)
    return PoolsRun(first_token=np.where(answered, last.first_token(n), np.nan),
                    end=np.where(answered, last.end(n), np.nan),
                    worker=np.where((worker >= 0) & answered, worker + offset, -1),
                    steps=sum(p.steps for p in pools), busy_s=sum(p.busy_s for p in pools),
                    sequences_in_steps=sum(p.sequences_in_steps for p in pools),
                    preemptions=sum(p.preemptions for p in pools), failed_s=failed, prefill_worker=prefill_worker)


def round_robin_picks(send_s: np.ndarray, size: int, kills: dict[int, float] | None = None) -> np.ndarray:
    """[n] the worker a round robin picks for each request as it arrives at `send_s` (sorted): the pool's
    counter, one a request, over the workers not killed by then (-1: none left)."""
    pending = sorted((t, w) for w, t in (kills or {}).items())
    alive, k = list(range(size)), 0
    picks = np.full(len(send_s), -1, dtype=np.int64)
    for turn, t in enumerate(np.asarray(send_s, dtype=float).tolist()):
        while k < len(pending) and pending[k][0] <= t:
            alive.remove(pending[k][1])
            k += 1
        if alive:
            picks[turn] = alive[turn % len(alive)]
    return picks


class RoundRobinPool:
    """Replicas fed requests in time order, round robin unless told whom; what they finished, and what failed,
    by request index. `num_kv_blocks`: each replica's cache (default: `server`'s)."""

    def __init__(self, server: SimServer, step_model: StepTimeModel, size: int, seed: int,
                 num_kv_blocks: int | None = None) -> None:
        blocks = _blocks(server) if num_kv_blocks is None else num_kv_blocks
        self.replicas = [ReplicaSim(server, step_model, num_kv_blocks=blocks, seed=seed * 1009 + k,
                                    shared_prefixes=False)   # no two prompts share tokens: nothing to hash
                         for k in range(size)]
        self._first: dict[int, float] = {}
        self._end: dict[int, float] = {}
        self._worker: dict[int, int] = {}
        self._failed: dict[int, float] = {}
        self.killed: dict[int, float] = {}   # worker -> when it was killed

    def run(self, times: np.ndarray, prompt: np.ndarray, output: np.ndarray, *,
            order: np.ndarray | None = None, kv=None, picks: np.ndarray | None = None,
            kills: dict[int, float] | None = None) -> None:
        """Send request i at times[i] (in `order`, default index order) to `picks[i]` (default: the next
        replica in turn); kill each of `kills` at its time (what it holds fails then; a request for it after
        that fails as it comes); run every replica left to the end of its work."""
        order = np.arange(len(times)) if order is None else order
        pending = sorted((t, w) for w, t in (kills or {}).items())
        k = 0
        for turn, i in enumerate(order):
            t = float(times[i])
            while k < len(pending) and pending[k][0] <= t:
                self._kill(pending[k][1], pending[k][0])
                k += 1
            rid = turn % len(self.replicas) if picks is None else int(picks[i])
            if rid < 0 or rid in self.killed:
                self._failed[int(i)] = t
                continue
            replica = self.replicas[rid]
            self._worker[int(i)] = rid
            replica.advance(t)
            replica.submit(int(i), [int(i)] * int(prompt[i]), int(output[i]), t,
                           kv_transfer_s=None if kv is None else kv.transfer_s(int(prompt[i])))
            self._drain(replica)
        for t, worker in pending[k:]:
            self._kill(worker, t)
        for rid, replica in enumerate(self.replicas):
            if rid not in self.killed:
                replica.advance(math.inf)
                self._drain(replica)

    def _kill(self, rid: int, t: float) -> None:
        """Replica rid dies at t: what it finished by then stands; the rest it holds fails at t."""
        replica = self.replicas[rid]
        replica.advance(t)   # its steps that start before t; one may end after it
        late = [i for i, end in replica.ended if end > t]
        replica.ended[:] = [(i, end) for i, end in replica.ended if end <= t]
        self._drain(replica)
        for i in (*replica.unfinished(), *late):
            self._failed[int(i)] = t
            self._first.pop(int(i), None)
        self.killed[rid] = t

    def _drain(self, replica: ReplicaSim) -> None:
        self._first.update(replica.first_tokens)
        self._end.update(replica.ended)
        replica.first_tokens.clear()
        replica.ended.clear()

    def first_token(self, n: int) -> np.ndarray:
        return _times(self._first, n)

    def end(self, n: int) -> np.ndarray:
        return _times(self._end, n)

    def failed(self, n: int) -> np.ndarray:
        """[n] when each request failed here (NaN: it did not)."""
        return _times(self._failed, n)

    def worker(self, n: int) -> np.ndarray:
        """[n] the replica each request was sent to (-1: none)."""
        out = np.full(n, -1, dtype=np.int64)
        if self._worker:
            out[np.fromiter(self._worker.keys(), dtype=np.int64)] = np.fromiter(self._worker.values(), dtype=np.int64)
        return out

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.replicas)

    @property
    def busy_s(self) -> float:
        return sum(r.busy_s for r in self.replicas)

    @property
    def sequences_in_steps(self) -> int:
        return sum(r.sequences_in_steps for r in self.replicas)

    @property
    def preemptions(self) -> int:
        return sum(r.preemptions for r in self.replicas)


def _blocks(server: SimServer) -> int:
    if server.num_kv_blocks is None:
        raise ValueError("a topology's replicas need their KV cache's size (num_kv_blocks)")
    return server.num_kv_blocks


def _times(found: dict[int, float], n: int) -> np.ndarray:
    times = np.full(n, np.nan)
    if found:
        index = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
        times[index] = np.fromiter(found.values(), dtype=float, count=len(found))
    return times
