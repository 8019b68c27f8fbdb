"""``servecap calc simulate --topology agg:2,1p1d``: aggregated against disaggregated, the same GPUs, the same load.

Each topology is simulated at every --rates level (calculators.plan.topology); with an SLO each level is
judged by `contract.slo.judge`, and a topology's best level is the report's: going up the rates, the
last that meets it before the first that does not. The winner
serves the most requests a second a GPU at the SLO; its gain is that rate over the other's, less one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from calculators.cli.output import print_json, print_rows
from contract.slo import SLO


@dataclass(frozen=True)
class TopologyLevel:
    topology: str
    gpus: int
    rate_rps: float
    result: object   # SimResult
    meets: bool | None
    reason: str

    def to_dict(self) -> dict:
        return {"topology": self.topology, "gpus": self.gpus, "rate_rps": self.rate_rps, "meets_slo": self.meets,
                "slo_reason": self.reason, **self.result.to_dict()}


def simulate_topologies(args, server, workload, model, rates: list[float], kv, slo: SLO) -> None:
    from calculators.plan.topology import Topology, judge_window, requests_for_rate, simulate_topology   # numpy: only here

    if not rates:
        raise ValueError("--topology: the topologies are simulated open loop: give --rates")
    if args.speculative_method:
        raise ValueError("--topology simulates without speculative decoding: leave out --speculative-method")
    topologies = [Topology.parse(text) for text in args.topology.split(",") if text.strip()]
    if not topologies:
        raise ValueError("--topology: name at least one, e.g. agg:2,1p1d")
    hop_s = args.pd_hop_ms / 1e3
    levels = []
    for topology in topologies:
        for rate in rates:
            level = replace(workload, rate_rps=rate, concurrency=None,
                            requests=requests_for_rate(rate, workload, args.requests))
            result, trace = simulate_topology(server, level, model, topology, kv=kv, hop_s=hop_s)
            meets, reason = judge_window(slo, trace, level)
            levels.append(TopologyLevel(str(topology), topology.workers * args.tp, rate, result, meets, reason))
    best = {str(t): _best(levels, str(t)) for t in topologies} if slo.is_set else {}
    answer = _answer(best, levels) if slo.is_set else None
    if args.json:
        return print_json({"strategy": args.strategy, "pd_hop_ms": args.pd_hop_ms,
                           "kv_transfer": None if kv is None else {"bytes_per_token": kv.bytes_per_token,
                                                                   "link_gbs": kv.link_bytes_per_s / 1e9,
                                                                   "latency_s": kv.latency_s},
                           "slo": slo.to_dict(), "levels": [level.to_dict() for level in levels],
                           "best": {name: None if lv is None else {"rate_rps": lv.rate_rps, "gpus": lv.gpus,
                                                                   "rate_per_gpu": lv.rate_rps / lv.gpus}
                                    for name, lv in best.items()},
                           "answer": answer})
    rows = [{"topology": lv.topology, "gpus": lv.gpus, "rate_rps": lv.rate_rps,
             **{f"{m}_{p}_ms": _ms(lv.result.metrics[f"{m}_s"][p]) for m in ("ttft", "tpot") for p in ("p50", "p99")},
             "output_tokens_per_s_per_gpu": lv.result.output_tokens_per_s / lv.gpus,
             **({"meets_slo": "yes" if lv.meets else f"no ({lv.reason})"} if slo.is_set else {})} for lv in levels]
    print_rows(f"Simulated topologies ({args.strategy} batching; round robin in each pool; PD hop "
               f"{args.pd_hop_ms:g} ms)", rows, list(rows[0]))
    if answer is not None:
        print(answer)


def _best(levels: list[TopologyLevel], name: str) -> TopologyLevel | None:
    """The report's rule for the most a strategy sustains (`reports.verdict.max_sustainable`): going up the
    rates, the last level that meets the SLO before the first that does not."""
    best = None
    for level in sorted((lv for lv in levels if lv.topology == name), key=lambda lv: lv.rate_rps):
        if not level.meets:
            break
        best = level
    return best


def _answer(best: dict, levels: list[TopologyLevel]) -> str:
    """Which topology serves the most requests a second a GPU at the SLO, and by how much."""
    met = {name: lv for name, lv in best.items() if lv is not None}
    if not met:
        return "No topology meets the SLO at any rate simulated: try lower --rates."
    ranked = sorted(met.values(), key=lambda lv: lv.rate_rps / lv.gpus, reverse=True)
    top = ranked[0]
    tied = [lv.topology for lv in ranked if lv.rate_rps / lv.gpus == top.rate_rps / top.gpus]
    if len(tied) > 1:
        text = (f"{' and '.join(tied)} tie at the SLO: {top.rate_rps / top.gpus:.3g} req/s a GPU at the rates "
                "simulated (finer --rates may tell them apart)")
    else:
        text = (f"{top.topology} serves the most at the SLO: {top.rate_rps:g} req/s on {top.gpus} GPUs "
                f"({top.rate_rps / top.gpus:.3g} req/s a GPU)")
    for other in ranked[len(tied):]:
        gain = (top.rate_rps / top.gpus) / (other.rate_rps / other.gpus) - 1
        text += f"; {gain:+.0%} over {other.topology} ({other.rate_rps:g} req/s on {other.gpus} GPUs)"
    missing = [name for name, lv in best.items() if lv is None]
    if missing:
        text += f"; {', '.join(missing)} met it at none of the rates simulated"
    highest = max(lv.rate_rps for lv in levels)
    if top.rate_rps == highest:
        text += f" (its best is the highest rate simulated, {highest:g} req/s: it may hold more)"
    return text + "."


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3
