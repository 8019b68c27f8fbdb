"""Argument parser of ``servecap calc``: one subcommand per calculator.

Every option a calculator shares with another command is that command's own declaration, added
here: the engine's (`engine_core.options`: --model, --dtype, --tp, --block-size, --speculative-*,
...), the GPU's (`engine_core.gpus.GpuOptions`: --gpu and its overrides), the batching limits
(`engine_core.scheduling.strategies.flags`), the workload's lengths (`contract.workload`), the load's
levels (`contract.load`), the efficiencies (`calculators.efficiency_profile.EfficiencyOptions`),
the queueing formulas' cv² (`calculators.queueing.Variability`) and --json (`contract.options`).
A calculator's own options are declared once below. Values arrive typed (argparse parses them), except
the lengths and the load, which keep the workload's and the load's syntax and are read by
`calculators.cli.inputs`.
"""

from __future__ import annotations

import argparse

from calculators.cli.inputs import CALC_DEFAULTS
from calculators.efficiency_profile import EfficiencyOptions
from calculators.queueing import Variability
from calculators.sim.speculative_step import ProposalShareOption
from contract.load import add_load_arguments
from contract.options import CommandParser, add_options, add_output_arguments
from contract.disaggregation import add_kv_link_arguments, add_pd_hop_argument, add_topology_argument
from contract.slo import add_slo_arguments
from contract.workload import add_workload_arguments
from engine_core.gpus import GpuOptions
from engine_core.options import SPECULATIVE, EngineOptions
from engine_core.scheduling.strategies.flags import add_limit_arguments

REPLICA_BATCH = ("--model: the replica model's batch, 256 by default (its requests wait their batch's whole "
                 "cycle, so a larger one overstates their latency)")
LENGTHS_HELP = ("the workload's forms (N | uniform:LO:HI | normal:MEAN:SD | lognormal:MEAN:SIGMA | file:PATH); a "
                "calculator that takes one number takes the distribution's mean, rounded (N: N exactly)")



def _jobs(text: str) -> int:
    """--jobs: a whole number of processes, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value

def _engine(p: argparse.ArgumentParser, title: str, *only: str) -> None:
    add_options(p, EngineOptions, title=title, only=only, typed=True)
    p.set_defaults(**{name: value for name, value in CALC_DEFAULTS.items() if name.replace("_", "-") in only})


def _model(p: argparse.ArgumentParser, *more: str) -> None:
    _engine(p, "model (the engine's options, as `servecap serve` takes them; --dtype default bf16, --tp 1)",
            "model", "dtype", *more)


def _gpu(p: argparse.ArgumentParser) -> None:
    add_options(p, GpuOptions, title="GPU", typed=True)


def _gpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=int, default=1, help="GPUs in all: whole replicas of --tp GPUs (default 1)")


def _keep_embeddings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep-embeddings-16bit", action="store_true", help="embeddings and output head stay 16-bit")


def _lengths(p: argparse.ArgumentParser, without: str, *only: str) -> None:
    """The workload's own length options; left out they are None here, and each calculator says what it
    does without them (`without`) or takes the workload's default."""
    add_workload_arguments(p, title="lengths", description=f"{LENGTHS_HELP}; {without}",
                           only=only or ("prompt-tokens", "output-tokens"))
    p.set_defaults(**{name.replace("-", "_"): None for name in only or ("prompt-tokens", "output-tokens")})


def _limits(p: argparse.ArgumentParser, *only: str, default: str = "a catalog GPU's default: its engine's, e.g. "
            "vLLM's 1024 sequences on 70 GiB or more, A100 aside, else 256") -> None:
    add_limit_arguments(p.add_argument_group("batching limits", f"each strategy's, as `servecap serve` takes them "
                                             f"({default})"), only or None)


def _efficiency(p: argparse.ArgumentParser, *only: str) -> None:
    add_options(p, EfficiencyOptions, title="efficiency", only=only or None, typed=True)


def _speculative(p: argparse.ArgumentParser) -> None:
    _engine(p, "speculative decoding (calculators.speculative): TPOT and tokens/s with and without, and the "
               "crossover", *SPECULATIVE)


def build_parser() -> argparse.ArgumentParser:
    json = argparse.ArgumentParser(add_help=False)
    add_output_arguments(json, out=None, report=False, json="print one JSON object")
    parser = CommandParser(prog="servecap calc", description="capacity calculators (pure functions)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="CALCULATOR")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[json])

    p = command("kv", "KV-cache bytes per token and per request")
    _model(p, "kv-dtype", "tp", "block-size")
    _lengths(p, "kv: a length left out counts no tokens (bytes per token only)")

    p = command("weights", "weight bytes and parameter count")
    _model(p, "tp")
    _keep_embeddings(p)

    p = command("fit", "vLLM memory budget: KV cache, blocks, max concurrency")
    _model(p, "kv-dtype", "tp", "dp", "block-size", "max-model-len", "gpu-memory-utilization", "max-loras",
           "max-lora-rank")
    _gpu(p), _gpus(p), _keep_embeddings(p)
    p.add_argument("--activation-gib", type=float, help="activation memory per GPU (default: vLLM's profile run)")
    p.add_argument("--non-torch-gib", type=float, help="memory outside torch per GPU (default: vLLM's)")
    _lengths(p, "fit: without them, the KV cache is sized by --max-model-len")
    _limits(p, "max-num-seqs", "max-num-batched-tokens")
    _efficiency(p)

    p = command("roofline", "decode step time, tokens/s and bound; prefill time")
    _model(p, "kv-dtype", "tp", "dp", "expert-parallel")
    _gpu(p)
    p.add_argument("--batch", type=int, default=1, help="sequences in a decode step (default 1)")
    p.add_argument("--context", type=int, default=1024, help="tokens each sequence holds in its cache (default 1024)")
    _lengths(p, "roofline: without --prompt-tokens, no prefill", "prompt-tokens")
    p.add_argument("--bandwidth-efficiency", type=float, help="override the profile's memory-bandwidth efficiency")
    p.add_argument("--compute-efficiency", type=float, help="override the profile's compute efficiencies")
    p.add_argument("--overhead-ms", type=float, help="override the profile's fixed costs per step and prefill")
    _efficiency(p)
    _speculative(p)

    p = command("queue", "queueing models: mmc, md1, mg1, ggc, batch")
    p.add_argument("--queue", required=True, choices=("mmc", "md1", "mg1", "ggc", "batch"))
    p.add_argument("--arrival-rate", type=float, required=True, help="requests/s")
    p.add_argument("--service-rate", type=float, help="requests/s one server completes (not for batch)")
    p.add_argument("--servers", type=int, default=1)
    add_options(p, Variability, title="variability (ggc; mg1: service only)", typed=True)
    p.add_argument("--batch-base-ms", type=float, help="batch: fixed time per batch")
    p.add_argument("--batch-per-item-ms", type=float, help="batch: added time per request in the batch")
    add_limit_arguments(p.add_argument_group("batch: its largest batch (as the dynamic strategy's limit)"),
                        ("max-batch-size",))

    p = command("fleet", "replicas for a request rate under a p99 SLO")
    p.add_argument("--rate", type=float, required=True, help="requests/s to serve")
    p.add_argument("--slo-p99-ms", type=float, required=True, help="p99 response time each request must meet")
    p.add_argument("--replica-capacity", type=float, help="measured requests/s of one saturated replica")
    p.add_argument("--replica-slots", type=int, default=1, help="requests one replica runs at once")
    _model(p, "tp")
    _gpu(p)
    _lengths(p, "fleet --model: default the workload's")
    _limits(p, "max-num-seqs", default=REPLICA_BATCH)
    add_options(p, Variability, title="variability", typed=True)
    _efficiency(p)

    p = command("cost", "USD per million tokens (and requests), measured or predicted throughput")
    _gpu(p), _gpus(p)
    p.add_argument("--tokens-per-s", type=float, help="peak output tokens/s of those GPUs (or give --model)")
    _model(p, "tp")
    _lengths(p, "cost --model: default the workload's")
    _limits(p, "max-num-seqs", default=REPLICA_BATCH)
    _efficiency(p)
    p.add_argument("--slo-tokens-per-s", type=float, help="tokens/s at the SLO operating point")
    p.add_argument("--requests-per-s", type=float, help="requests/s served (USD per million requests)")

    p = command("simulate", "discrete-event simulation of a batching strategy over load levels")
    _engine(p, "engine (as `servecap serve` takes it; with --model and --gpu sized as its engine would there)",
            "strategy", "model", "dtype", "kv-dtype", "tp", "dp", "expert-parallel", "kv-blocks", "block-size",
            "max-model-len")
    add_load_arguments(p, only=("concurrency", "rates", "arrival", "warmup", "duration"), title="load (choose one)")
    p.add_argument("--requests", type=int, default=2000,
                   help="simulated requests per level (default 2000); --session levels measure the load test's "
                        "window instead (--warmup, --duration) and draw what it takes")
    p.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="levels simulated at once, one process each (default: the machine's cores); the same answer")
    _lengths(p, "default the workload's", "prompt-tokens", "output-tokens", "seed", "session", "think-time")
    p.add_argument("--answers-read-back", choices=("yes", "no"), default="yes",
                   help="--session: does the served model's text read back as the ids it generated, so a returning "
                        "turn finds its answers cached (yes, the default: a real model, mostly); no: a model whose "
                        "text does not (the reference server's random weights), so only what was sent is found")
    topo = p.add_argument_group("topologies (aggregated against disaggregated prefill/decode, open loop)")
    add_topology_argument(topo, "simulate each of these deployments at every --rates level, e.g. agg:2,1p1d: agg:N "
                                "is N replicas, PpDd P prefill and D decode workers behind a PD router (round robin "
                                "in each pool); with an SLO, the one that serves the most req/s a GPU under it",
                          metavar="LIST")
    topo.add_argument("--crossover", default=None, metavar="PROMPTS/OUTPUTS",
                      help="when disaggregation pays: for every prompt and output length (e.g. 200,2000,8000/200,2000), "
                           "search the most req/s a GPU each --topology sustains at the SLO (no --rates: the search "
                           "finds them) and name the winner, its gain and whether the search settles it")
    topo.add_argument("--crossover-precision", type=float, default=0.05, metavar="FRACTION",
                      help="--crossover: stop refining a topology's rate when the bracket's ends are within this "
                           "fraction (default 0.05)")
    add_kv_link_arguments(topo)
    add_pd_hop_argument(topo)
    add_slo_arguments(p, title="SLO for --topology (p99, milliseconds)")
    p.add_argument("--step-base-ms", type=float, help="measured step model: fixed ms per step")
    p.add_argument("--step-per-seq-ms", type=float, default=0.0, help="measured: ms per running sequence")
    p.add_argument("--step-per-prefill-token-ms", type=float, default=0.0, help="measured: ms per prompt token")
    p.add_argument("--step-per-context-token-ms", type=float, default=0.0, help="measured: ms per cached token")
    _gpu(p)
    _limits(p)
    _efficiency(p)
    _speculative(p)
    add_options(p, ProposalShareOption, typed=True)

    p = command("calibrate", "fit step time = a + b x batch (+ prefill tokens), or --roofline efficiencies")
    p.add_argument("--steps", required=True,
                   help="CSV: batch_size, step_s[, prefill_tokens]; with --roofline also [context_tokens, tp]")
    p.add_argument("--roofline", action="store_true",
                   help="fit the roofline's efficiencies and costs per TP degree; write them with --out")
    add_output_arguments(p, out="--roofline: write the efficiency profile here (JSON)", metavar="FILE",
                         report=False, title="profile")
    _model(p, "kv-dtype", "tp")
    _gpu(p)
    _efficiency(p, "engine")

    command("gpus", "list the GPU catalog")
    command("models", "list the model catalog")
    return parser
