"""Aggregated and disaggregated deployments of one engine, simulated over the same open-loop arrivals.

    Topology.parse("agg:2")   # two replicas that prefill and decode, requests in turn (round robin)
    Topology.parse("1p1d")    # one prefill worker and one decode worker behind a PD router
    simulate_topology(server, workload, step_model, topology, kv=KvLink(bytes_per_token, link_bytes_per_s))

A disaggregated request is what `vllm-router --vllm-pd-disaggregation` makes of it: the router sends a
prefill worker a copy with `max_tokens` 1, waits for its whole (unstreamed) answer, then sends a decode
worker the original request; the decode worker allocates the prompt's blocks, receives every prompt
token's KV but the last over the link (`KvLink.transfer_s`), computes the last token for its logits and
decodes the whole output (`engine_core`'s continuous scheduler, `Sequence.kv_transfer_s`). So:
    TTFT = prefill worker's queue + prompt + hop + decode worker's queue + transfer + its first step,
and the decode worker's steps carry no prompt, which is what disaggregation buys its inter-token time.

The pools run as `calculators.plan.pools.run_pools` runs them: round robin in each (the only policy modelled
here), the prefill pool over the whole arrival schedule first, its answers `hop_s` later the decode pool's
arrivals. `hop_s` is what the router and the two HTTP exchanges add between the prefill worker's last step
and the decode worker's queue: a host's front end, 0 by default (a GPU what-if leaves front ends out). Open
loop and traces only: a closed loop's next send depends on the decode pool, which this two-pass order does
not follow.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from calculators.plan.pools import run_pools
from calculators.sim.simulate import SimResult, measured_window, result_of
from calculators.sim.state import Trace
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer, SimWorkload
from contract.records import tpot_s
from contract.slo import SLO, SloSample, judge

_AGG = re.compile(r"agg:(\d+)$")
_DISAGG = re.compile(r"(\d+)p(\d+)d$")


@dataclass(frozen=True)
class Topology:
    """`replicas` aggregated replicas, or `prefill` + `decode` workers (one GPU group each, `tp` GPUs)."""

    replicas: int = 0
    prefill: int = 0
    decode: int = 0

    def __post_init__(self) -> None:
        if self.replicas < 0 or self.prefill < 0 or self.decode < 0:
            raise ValueError("a topology counts replicas and workers: none can be negative")
        if bool(self.replicas) == bool(self.prefill or self.decode):
            raise ValueError("a topology is aggregated (agg:N) or disaggregated (PpDd), one of them")
        if not self.replicas and not (self.prefill and self.decode):
            raise ValueError("a disaggregated topology needs at least one prefill and one decode worker (1p1d)")

    @classmethod
    def parse(cls, text: str) -> "Topology":
        """'agg:N' (N replicas) or 'PpDd' (P prefill and D decode workers), e.g. agg:2, 1p1d, 2p1d."""
        spec = text.strip().lower()
        if m := _AGG.match(spec):
            return cls(replicas=int(m.group(1)))
        if m := _DISAGG.match(spec):
            return cls(prefill=int(m.group(1)), decode=int(m.group(2)))
        raise ValueError(f"topology {text!r}: give agg:N (N aggregated replicas) or PpDd (e.g. 1p1d: one prefill "
                         "and one decode worker)")

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def workers(self) -> int:
        return self.replicas + self.prefill + self.decode

    def __str__(self) -> str:
        return f"{self.prefill}p{self.decode}d" if self.disaggregated else f"agg:{self.replicas}"


@dataclass(frozen=True)
class KvLink:
    """A prompt's KV on its way from a prefill worker to a decode worker: bytes a token, the link, a fixed
    latency. Every token's KV but the last's moves (the decode worker computes the last)."""

    bytes_per_token: float
    link_bytes_per_s: float
    latency_s: float = 0.0

    def transfer_s(self, prompt_tokens: int) -> float:
        return self.latency_s + max(prompt_tokens - 1, 0) * self.bytes_per_token / self.link_bytes_per_s


def kv_link_for(gpu, sizing, link_gbs: float | None = None, latency_us: float | None = None) -> KvLink:
    """The KV link on catalog `gpu` for an engine `sizing` (`calculators.gpu_engine`): its KV bytes a token, over
    `link_gbs` or the GPU's interconnect, the rule `servecap serve --emulate --role decode` follows."""
    latency_us = 0.0 if latency_us is None else latency_us
    if link_gbs is not None and not link_gbs > 0:
        raise ValueError(f"--kv-transfer-gbs must be > 0, got {link_gbs}")
    if not (latency_us >= 0 and math.isfinite(latency_us)):
        raise ValueError(f"--kv-transfer-latency-us must be >= 0, got {latency_us}")
    link = link_gbs * 1e9 if link_gbs is not None else gpu.interconnect_bytes_per_s
    if link is None:
        raise ValueError(f"{gpu.name} has no interconnect in the catalog: give --kv-transfer-gbs")
    return KvLink(sizing.fit.kv_block_bytes / sizing.block_size, link, latency_us / 1e6)


def simulate_topology(server: SimServer, workload: SimWorkload, step_model: StepTimeModel, topology: Topology, *,
                      kv: KvLink | None = None, hop_s: float = 0.0) -> tuple[SimResult, Trace]:
    """One open-loop level on `topology`: its summary over the workload's measure window, and the trace.
    Every replica and worker has `server`'s limits and cache and `step_model`'s steps (a decode worker's
    prompt tokens are received, not computed)."""
    if workload.concurrency is not None:
        raise ValueError("a topology is simulated open loop: give rates (or a trace), not a concurrency")
    if topology.disaggregated and kv is None:
        raise ValueError("a disaggregated topology needs the KV link (bytes a token and the link's bytes/s)")
    if topology.disaggregated and server.strategy != "continuous":
        raise ValueError(f"disaggregated workers run the continuous strategy, not {server.strategy!r}")
    if not (hop_s >= 0 and math.isfinite(hop_s)):
        raise ValueError(f"hop_s must be a finite number >= 0, got {hop_s!r}")
    rng = np.random.default_rng(workload.seed)
    prompt, output, _ = workload.sample_lengths(rng, workload.request_count)
    arrival = workload.open_loop_arrivals(rng)
    arrival = arrival[arrival < workload.horizon_s]   # a load test stops sending at its window's end
    n = len(arrival)
    prompt, output = prompt[:n], output[:n]
    pools = run_pools(server, step_model, topology, arrival, prompt, output, kv=kv, hop_s=hop_s, seed=workload.seed)
    trace = Trace(prompt=prompt, output=output, arrival=arrival.copy(), first_token=pools.first_token,
                  end=pools.end, client_send=arrival.copy(), steps=pools.steps, busy_s=pools.busy_s,
                  sequences_in_steps=pools.sequences_in_steps, preemptions=pools.preemptions)
    window = measured_requests(trace, workload)
    if not len(window):
        raise ValueError(f"{topology}: no simulated request falls in the measure window")
    return result_of(server, workload, trace, window), trace


def requests_for_rate(rate: float, workload: SimWorkload, floor: int) -> int:
    """Requests to draw for an open-loop level: enough to keep the load on to the window's end (the run
    stops sending there), at least `floor` (all of them without a window)."""
    if workload.duration_s is None:
        return floor
    return max(floor, math.ceil(rate * workload.horizon_s * 1.5) + 50)


def judge_window(slo: SLO, trace: Trace, workload: SimWorkload) -> tuple[bool | None, str]:
    """The SLO's verdict on a level's measure window, as `contract.slo.judge` gives it on a run's records
    ((None, "") when no SLO is set): a request that never finished is unfinished, not fast."""
    if not slo.is_set:
        return None, ""
    window = measured_requests(trace, workload)
    finished = np.isfinite(trace.end[window])
    ttft, e2e = trace.client_ttft()[window], trace.client_e2e()[window]
    tpot = tpot_s(e2e, ttft, trace.output[window])
    verdict = judge(slo, SloSample.from_arrays(ok=finished, unfinished=~finished, ttft_s=ttft, tpot_s=tpot,
                                               e2e_s=e2e))
    return verdict.meets, verdict.reason


def measured_requests(trace: Trace, workload: SimWorkload) -> np.ndarray:
    """The requests a load test measures: with a time window, those sent in it (each runs to its end, as a
    load test waits for the requests in flight at its stop); else the simulator's count rule."""
    if workload.duration_s is None:
        return measured_window(trace, workload)
    return np.flatnonzero(trace.client_send >= workload.warmup_s)


