"""Aggregated against disaggregated on the same two emulated GPUs: the simulator's winner against the measured one
(issue 55's agg-vs-disagg check).

    python -m lab.servecap.pd_vs_agg --out DIR [--cases 8000/200@1,2,3,4,5;2000/500@2,4,6,8,10;200/2000@0.5,1,1.5,2,3]
        [--slo-ttft-ms 1000 --slo-tpot-ms 15] [--warmup 5s --duration 20s] [--stream-interval 16] [--pd-hop-ms 0]

For each case (prompt/output tokens @ rates) it runs, one after the other:
- agg:2: two emulated replicas (`servecap serve --emulate GPU --model M`) behind `vllm-router --policy
  round_robin`;
- 1p1d: one `--role prefill` and one `--role decode` worker behind `vllm-router --vllm-pd-disaggregation`
  (round robin in each pool);
each swept open loop (`servecap sweep --url ROUTER --rates ... --arrival poisson`, with the SLO, the report
written), then `servecap calc simulate --topology agg:2,1p1d` with the same lengths, rates, window and SLO.
Measured best per topology: the report's most sustainable level (summary.json's verdict, "all" limits);
predicted: calc simulate's, by the same rule. Prints per case the winner each way and the gain (best rate of
the winner over the other's, less one), and per level the p99 TTFT and TPOT measured and predicted; writes
OUT/compare.json. The workers stream `--stream-interval` tokens a chunk (both topologies alike) so this
2-core host's front end does not cap the decode rate; the first token still goes out at once.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from servecap.fleet.router import RouterSpec, pd_router_argv, router_argv
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

TOPOLOGIES = ("agg:2", "1p1d")


def _workers(args, roles: tuple[str, ...]):
    base = ["--emulate", args.gpu, "--model", args.model, "--no-classifier", "--max-model-len",
            str(args.max_model_len), "--stream-interval", str(args.stream_interval)]
    return [ServerProcess(ReferenceServerSpec.from_flags([*base, *(["--role", r] if r != "both" else [])]),
                          startup_timeout_s=180) for r in roles]


def _measure(args, topology: str, case: dict, out: Path) -> dict:
    roles = ("both", "both") if topology == "agg:2" else ("prefill", "decode")
    workers = _workers(args, roles)
    for worker in workers:
        worker.__enter__()
    try:
        urls = tuple(w.base_url for w in workers)
        argv = router_argv("round_robin", urls) if topology == "agg:2" else pd_router_argv(urls[:1], urls[1:])
        with ServerProcess(RouterSpec(argv, ready_path="/health"), startup_timeout_s=60) as router:
            command = [sys.executable, "-m", "servecap", "sweep", "--url", router.base_url, "--model", args.model,
                       "--out", str(out), "--rates", case["rates"], "--arrival", "poisson",
                       "--warmup", args.warmup, "--duration", args.duration,
                       "--prompt-tokens", str(case["prompt"]), "--output-tokens", str(case["output"]),
                       "--slo-ttft-ms", str(args.slo_ttft_ms), "--slo-tpot-ms", str(args.slo_tpot_ms),
                       "--no-pin-cpus"]
            print("$ " + " ".join(command), flush=True)
            with (out.parent / f"{out.name}.log").open("w") as log:
                subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, timeout=1800)
    finally:
        for worker in reversed(workers):
            worker.__exit__(None, None, None)
    return _measured(out)


def _measured(out: Path) -> dict:
    """A sweep's summary.json (`contract.summary`): the most it sustains under every limit, and each level's p99s."""
    from contract.summary import Summary

    summary = Summary.from_dict(json.loads((out / "summary.json").read_text()))
    (row,) = [r for r in summary.verdict.max_sustainable if r.slo == "all"]
    levels = {lv.load: {m: lv.metric(m).at("p99") for m in ("ttft_s", "tpot_s")} for lv in summary.levels}
    return {"best_rate": None if row.offered is None else row.offered.value, "failing": row.failing_reason,
            "levels": levels}


def _predict(args, case: dict) -> dict:
    command = [sys.executable, "-m", "servecap", "calc", "simulate", "--model", args.model, "--gpu", args.gpu,
               "--max-model-len", str(args.max_model_len), "--prompt-tokens", str(case["prompt"]),
               "--output-tokens", str(case["output"]), "--rates", case["rates"], "--arrival", "poisson",
               "--warmup", args.warmup, "--duration", args.duration, "--topology", ",".join(TOPOLOGIES),
               "--slo-ttft-ms", str(args.slo_ttft_ms), "--slo-tpot-ms", str(args.slo_tpot_ms),
               "--pd-hop-ms", str(args.pd_hop_ms), "--json"]
    answer = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    out = {t: {"best_rate": None if answer["best"][t] is None else answer["best"][t]["rate_rps"], "levels": {}}
           for t in TOPOLOGIES}
    for row in answer["levels"]:   # calc simulate's JSON
        out[row["topology"]]["levels"][row["rate_rps"]] = {m: row["metrics"][m]["p99"] for m in ("ttft_s", "tpot_s")}
    return out


def _winner(best: dict) -> tuple[str | None, float | None]:
    """The topology with the higher sustained rate (same GPUs), and its gain over the other; a tie: None, 0."""
    a, b = (best[t] or 0.0 for t in TOPOLOGIES)
    if a == b:
        return None, 0.0
    top, other = (TOPOLOGIES[0], b) if a > b else (TOPOLOGIES[1], a)
    return top, (max(a, b) / other - 1) if other else None


def _bests(side: dict) -> str:
    return ", ".join(f"{t} {side[t]['best_rate']}" for t in TOPOLOGIES)


def _said(winner: str | None, gain: float | None) -> str:
    if winner is None:
        return "tie"
    return f"{winner} ({'no rate met by the other' if gain is None else format(gain, '+.0%')})"


def _cases(text: str) -> list[dict]:
    cases = []
    for part in text.split(";"):
        lengths, rates = part.split("@")
        prompt, output = lengths.split("/")
        cases.append({"prompt": int(prompt), "output": int(output), "rates": rates})
    return cases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cases", default="8000/200@1,2,3,4,5;2000/500@2,4,6,8,10;200/2000@0.5,1,1.5,2,3")
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--max-model-len", type=int, default=8704)
    p.add_argument("--slo-ttft-ms", type=float, default=1000.0)
    p.add_argument("--slo-tpot-ms", type=float, default=15.0)
    p.add_argument("--warmup", default="5s")
    p.add_argument("--duration", default="20s")
    p.add_argument("--stream-interval", type=int, default=16)
    p.add_argument("--pd-hop-ms", type=float, default=0.0)
    p.add_argument("--compare-only", action="store_true", help="read the sweeps already in OUT")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in _cases(args.cases):
        name = f"{case['prompt']}-{case['output']}"
        measured = {}
        for topology in TOPOLOGIES:
            out = args.out / f"{name}-{topology.replace(':', '')}"
            if not args.compare_only:
                measured[topology] = _measure(args, topology, case, out)
            else:
                measured[topology] = _measured(out)
        predicted = _predict(args, case)
        m_win, m_gain = _winner({t: measured[t]["best_rate"] for t in TOPOLOGIES})
        p_win, p_gain = _winner({t: predicted[t]["best_rate"] for t in TOPOLOGIES})
        rows.append({"case": name, "measured": measured, "predicted": predicted, "measured_winner": m_win,
                     "measured_gain": m_gain, "predicted_winner": p_win, "predicted_gain": p_gain})
        print(f"\n{name}: measured best {_bests(measured)} -> {_said(m_win, m_gain)}; "
              f"predicted {_bests(predicted)} -> {_said(p_win, p_gain)}", flush=True)
        for topology in TOPOLOGIES:
            for rate, got in sorted(measured[topology]["levels"].items()):
                want = predicted[topology]["levels"].get(rate)
                if want:
                    print(f"  {topology:6} {rate:5g}/s  p99 TTFT {got['ttft_s'] * 1e3:8.1f} ms measured, "
                          f"{want['ttft_s'] * 1e3:8.1f} predicted; p99 TPOT {got['tpot_s'] * 1e3:6.2f} measured, "
                          f"{want['tpot_s'] * 1e3:6.2f} predicted")
    picked = sum(r["measured_winner"] == r["predicted_winner"] for r in rows)
    print(f"\nthe simulator picks the measured winner in {picked} of {len(rows)}")
    (args.out / "compare.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                       "cases": rows, "picked": picked}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
