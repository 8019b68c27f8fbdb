"""Aggregated or disaggregated, and how many of each, for a GPU budget: the search `servecap plan --search topology`
runs over the demand's busiest window.

    search_topologies(replica, window, slo, gpu_budget=64, kv=KvLink(...), hop_s=0.0) -> TopologySearch

Round robin gives replica j of a pool of k exactly requests j, j + k, j + 2k, ... of the stream it is fed, and
every replica is alike, so one replica's run (replica 0's share) stands for its pool: a pool of k costs what
one replica's share costs, and the search sizes 64 GPUs in seconds. What stands in for the rest:
- an aggregated pool of N is replica 0 fed every N-th request of the window (its own requests, exactly);
- a prefill pool of P is its replica 0 fed every P-th request; request i meets the prefill latency that
  replica gave its (i // P)-th request (the replicas are alike, their latencies not drawn again);
- a decode pool of D is its replica 0 fed every D-th request in the order the prefill answers (plus the
  hop) reach the router, each prompt's KV received over the link (`calculators.plan.topology`).
Each candidate is judged by the one SLO rule (`contract.slo.judge`) over that replica's requests; one whose
prompts' prefill alone, queued in arrival order, already puts the p99 TTFT past its limit fails unrun.

The search: the fewest aggregated replicas that meet the SLO (a binary search: more replicas never make
a round robin's share slower), then for P = 1, 2, ... prefill workers the fewest decode workers that meet
it, which never grows with P (faster prefill leaves the decode pool more of the TTFT), until it stops
falling. The answer: the cheapest of each kind (fewest GPUs), and the Pareto front of output tokens/s a GPU
against tokens/s a user (1 / TPOT p50) over every candidate that meets the SLO, each with its cost per
million output tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from calculators.plan.pools import RoundRobinPool
from calculators.plan.topology import KvLink, Topology
from contract.records import tpot_s
from contract.slo import PERCENTILE, SLO, SloSample, judge, percentile


@dataclass(frozen=True)
class Window:
    """The requests to size for: send offsets (s, sorted, from the window's start), prompt and output tokens."""

    t_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    span_s: float

    def __post_init__(self) -> None:
        if not len(self.t_s):
            raise ValueError("the window to size for has no requests")

    @property
    def rate_rps(self) -> float:
        return len(self.t_s) / self.span_s

    @property
    def output_tokens_per_s(self) -> float:
        return float(self.output.sum()) / self.span_s


@dataclass(frozen=True)
class Candidate:
    topology: Topology
    gpus: int
    meets: bool
    reason: str
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float | None
    usd_per_million_tokens: float | None

    def to_dict(self) -> dict:
        return {"topology": str(self.topology), "gpus": self.gpus, "meets_slo": self.meets, "reason": self.reason,
                "ttft_p99_s": self.ttft_p99_s, "tpot_p50_s": self.tpot_p50_s, "tpot_p99_s": self.tpot_p99_s,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "tokens_per_s_per_user": self.tokens_per_s_per_user,
                "usd_per_million_tokens": self.usd_per_million_tokens}


@dataclass(frozen=True)
class TopologySearch:
    candidates: tuple[Candidate, ...]
    best_aggregated: Candidate | None
    best_disaggregated: Candidate | None
    pareto: tuple[Candidate, ...]
    rate_rps: float
    gpu_budget: int
    evaluations: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def answer(self) -> str:
        agg, pd = self.best_aggregated, self.best_disaggregated
        if agg is None and pd is None:
            return (f"Neither kind meets the SLO at {self.rate_rps:.3g} req/s within {self.gpu_budget} GPUs: "
                    "a larger budget, a faster GPU or a looser SLO.")
        if agg is None or pd is None:
            top, kind = (agg, "aggregated") if pd is None else (pd, "disaggregated")
            other = "disaggregated" if pd is None else "aggregated"
            return (f"Only {kind} meets the SLO at {self.rate_rps:.3g} req/s within {self.gpu_budget} GPUs: "
                    f"{top.topology} on {top.gpus} GPUs{_cost(top)}; no {other} topology does.")
        top, other = (pd, agg) if pd.gpus < agg.gpus else (agg, pd)
        if pd.gpus == agg.gpus:
            return (f"A tie at {agg.gpus} GPUs for {self.rate_rps:.3g} req/s: {agg.topology}{_cost(agg)} and "
                    f"{pd.topology}{_cost(pd)}.")
        return (f"{top.topology} meets the SLO at {self.rate_rps:.3g} req/s on {top.gpus} GPUs{_cost(top)}, "
                f"{other.gpus - top.gpus} fewer than {other.topology} ({other.gpus} GPUs): "
                f"{other.gpus / top.gpus - 1:+.0%} tokens/s a GPU.")

    def to_dict(self) -> dict:
        return {"rate_rps": self.rate_rps, "gpu_budget": self.gpu_budget, "evaluations": self.evaluations,
                "best_aggregated": None if self.best_aggregated is None else self.best_aggregated.to_dict(),
                "best_disaggregated": None if self.best_disaggregated is None else self.best_disaggregated.to_dict(),
                "pareto": [c.to_dict() for c in self.pareto], "candidates": [c.to_dict() for c in self.candidates],
                "answer": self.answer(), "notes": list(self.notes)}


def _cost(c: Candidate) -> str:
    return "" if c.usd_per_million_tokens is None else f" (${c.usd_per_million_tokens:.3g} per million output tokens)"


class _Searcher:
    """One replica's run per pool, memoised; each candidate judged once."""

    def __init__(self, replica, window: Window, slo: SLO, kv: KvLink | None, hop_s: float) -> None:
        self.replica, self.window, self.slo, self.kv, self.hop_s = replica, window, slo, kv, hop_s
        self._prefill: dict[int, np.ndarray] = {}
        self.candidates: dict[Topology, Candidate] = {}

    def _run(self, index: np.ndarray, times: np.ndarray, *, prefill: bool = False, received: bool = False):
        """One replica fed requests `index` (in that order) at `times` (by request): their first-token and end
        times; a prefill worker's requests ask for one token, a decode worker's prompts are received."""
        w, spec = self.window, self.replica
        pool = RoundRobinPool(spec.server, spec.step_model, 1, 0, num_kv_blocks=spec.num_kv_blocks)
        pool.run(times, w.prompt, np.ones(len(w.t_s), dtype=np.int64) if prefill else w.output, order=index,
                 kv=self.kv if received else None)
        n = len(w.t_s)
        return pool.first_token(n)[index], pool.end(n)[index]

    def prefill_latency(self, p: int) -> np.ndarray:
        """[n] each request's time from its send to its prefill answer, in a pool of `p`."""
        if p not in self._prefill:
            w = self.window
            index = np.arange(0, len(w.t_s), p)
            _, end = self._run(index, w.t_s, prefill=True)
            own = end - w.t_s[index]
            self._prefill[p] = own[np.minimum(np.arange(len(w.t_s)) // p, len(own) - 1)]
        return self._prefill[p]

    def _overloaded(self, share: int) -> str | None:
        """Why replica 0 of a pool of `share` cannot meet the TTFT limit, without running it, or None: the
        prompts' prefill alone, one after another in arrival order (a queue whose service is each prompt's
        prefill time: a lower bound on every first token, as the engine admits in order and prefill cost
        adds up token by token), already puts the p99 above the limit."""
        limit = self.slo.limits_s().get("ttft_s")
        if limit is None:
            return None
        w = self.window
        index = np.arange(0, len(w.t_s), share)
        work = w.prompt[index] * self.replica.step_model.per_prefill_token_s
        done, bound = 0.0, np.empty(len(index))
        for k, (t, s) in enumerate(zip(w.t_s[index], work)):
            done = max(done, t) + s
            bound[k] = done - t
        p99 = percentile(bound, PERCENTILE)
        if p99 is None or p99 <= limit:
            return None
        return f"ttft_s p99 >= {p99 * 1e3:.1f} ms > {limit * 1e3:.1f} ms (the prompts' prefill alone, in arrival order)"

    def evaluate(self, topology: Topology) -> Candidate:
        if topology in self.candidates:
            return self.candidates[topology]
        w = self.window
        gpus = topology.workers * self.replica.gpus
        overloaded = self._overloaded(topology.prefill if topology.disaggregated else topology.replicas)
        if overloaded is not None:
            candidate = Candidate(topology, gpus, False, overloaded, None, None, None,
                                  w.output_tokens_per_s / gpus, None, None)
            self.candidates[topology] = candidate
            return candidate
        if topology.disaggregated:
            handed = w.t_s + self.prefill_latency(topology.prefill) + self.hop_s
            order = np.argsort(handed, kind="stable")[::topology.decode]
            first, end = self._run(order, handed, received=True)
            sent = w.t_s[order]
        else:
            order = np.arange(0, len(w.t_s), topology.replicas)
            sent = w.t_s[order]
            first, end = self._run(order, w.t_s)
        ttft, e2e = first - sent, end - sent
        tpot = tpot_s(e2e, ttft, w.output[order])
        finished = np.isfinite(end)
        verdict = judge(self.slo, SloSample.from_arrays(ok=finished, unfinished=~finished, ttft_s=ttft, tpot_s=tpot,
                                                        e2e_s=e2e))
        tpot_p50 = _percentile(tpot, 50)
        price = self.replica.hourly_usd_per_gpu
        candidate = Candidate(
            topology=topology, gpus=gpus, meets=verdict.meets, reason=verdict.reason,
            ttft_p99_s=verdict.p99_s.get("ttft_s"), tpot_p50_s=tpot_p50, tpot_p99_s=verdict.p99_s.get("tpot_s"),
            tokens_per_s_per_gpu=w.output_tokens_per_s / gpus,
            tokens_per_s_per_user=None if not tpot_p50 else 1.0 / tpot_p50,
            usd_per_million_tokens=None if price is None else gpus * price / (w.output_tokens_per_s * 3600) * 1e6)
        self.candidates[topology] = candidate
        return candidate


def _percentile(values: np.ndarray, q: float) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if len(values) else None


def _fewest(meets, lo: int, hi: int) -> int | None:
    """The smallest n in [lo, hi] with meets(n), for a `meets` that stays true once true; None if none."""
    if hi < lo or not meets(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def search_topologies(replica, window: Window, slo: SLO, *, gpu_budget: int, kv: KvLink | None,
                      hop_s: float = 0.0) -> TopologySearch:
    """`replica`: a plan's ReplicaSpec (its server, step model, KV blocks, GPUs and price); `kv`: the link
    (None: aggregated topologies only)."""
    if not slo.is_set:
        raise ValueError("the topology search sizes for an SLO: give --slo-ttft-ms and/or --slo-tpot-ms")
    if replica.server.strategy != "continuous":
        raise ValueError(f"the topology search runs the continuous strategy, not {replica.server.strategy!r}")
    most = gpu_budget // replica.gpus
    if most < 1:
        raise ValueError(f"a GPU budget of {gpu_budget} holds no replica of {replica.gpus} GPUs")
    s = _Searcher(replica, window, slo, kv, hop_s)
    agg_n = _fewest(lambda n: s.evaluate(Topology(replicas=n)).meets, 1, most)
    if agg_n is not None:   # the front's aggregated side: every size from the fewest to the budget
        for n in range(agg_n, most + 1):
            s.evaluate(Topology(replicas=n))
    notes = []
    best_pd = None
    if kv is not None and most >= 2:
        last = None
        for p in range(1, most):
            d = _fewest(lambda d: s.evaluate(Topology(prefill=p, decode=d)).meets, 1,
                        (most - p) if last is None else min(last, most - p))
            if d is None:
                if last is not None:
                    break
                continue
            if last is not None and d == last:
                break   # more prefill workers no longer save a decode worker: each more only adds a GPU
            last = d
            if best_pd is None or p + d < best_pd[0] + best_pd[1]:
                best_pd = (p, d)
        if best_pd is not None:   # the front's disaggregated side: the cheapest split with more decode workers
            p, d = best_pd
            for extra in range(d, most - p + 1):
                s.evaluate(Topology(prefill=p, decode=extra))
    else:
        notes.append("disaggregated topologies not searched: " + ("no KV link" if kv is None else
                                                                   "the budget holds fewer than two workers"))
    candidates = tuple(s.candidates.values())
    meeting = [c for c in candidates if c.meets]
    best_agg = min((c for c in meeting if not c.topology.disaggregated), key=_rank, default=None)
    best_dis = min((c for c in meeting if c.topology.disaggregated), key=_rank, default=None)
    return TopologySearch(candidates=candidates, best_aggregated=best_agg, best_disaggregated=best_dis,
                          pareto=_pareto(meeting), rate_rps=window.rate_rps, gpu_budget=gpu_budget,
                          evaluations=len(candidates), notes=tuple(notes))


def _rank(c: Candidate) -> tuple:
    """Fewest GPUs first; then the faster for each user."""
    return (c.gpus, -(c.tokens_per_s_per_user or 0.0))


def _pareto(meeting: list[Candidate]) -> tuple[Candidate, ...]:
    """Candidates no other beats on both tokens/s a GPU and tokens/s a user, by tokens/s a GPU (high first)."""
    points = sorted(meeting, key=lambda c: (-c.tokens_per_s_per_gpu, -(c.tokens_per_s_per_user or 0.0)))
    front, fastest = [], -math.inf
    for c in points:
        user = c.tokens_per_s_per_user or 0.0
        if user > fastest:
            front.append(c)
            fastest = user
    return tuple(front)
