"""`servecap sweep`: run a load plan against the reference server (per strategy) or a --url, then report.

    servecap sweep --strategies none,static,dynamic,continuous --concurrency 1,4,8 --out runs/cmp
    servecap sweep --url http://127.0.0.1:8000 --rates 1,2,4 --arrival poisson --out runs/vllm
    servecap sweep --url http://127.0.0.1:8000 --trace mooncake.jsonl --trace-speedup 2 --out runs/replay
    servecap sweep --url http://127.0.0.1:8000 --trace BurstGPT_1.csv --trace-speedup 60 --out runs/burst
    servecap sweep --auto --slo-tpot-ms 50 --strategies continuous --out runs/knee
    servecap sweep --scenario classify --rows uniform:1:8 --concurrency 1,4,16 --out runs/mlp
    servecap sweep --scenario embed --rows uniform:1:8 --prompt-tokens uniform:16:256 --concurrency 1,8 --out runs/emb
    servecap sweep --scenario classify --protocol grpc --rows 64 --concurrency 4 \
        --server-args "--classifier-max-queue-delay-us 500 --classifier-instances 2" --out runs/mlp-grpc
"""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.console import Console

from servecap.sweep.calibrate_stage import check_calibrate, run_stage
from servecap.sweep.runner import Sweep
from servecap.sweep.config import SweepConfig, parse_duration, parse_number_list, parse_server_args_matrix
from servecap.sweep.loadgen_priority import PRIORITY_MODES
from loadgen.scenario.chat_config import (CHARS_HELP, DATASET_HELP, REASONING_HELP, SAMPLING_HELP, TRACE_HELP,
                                          TURNS_HELP)
from loadgen.workload.conversations import parse_turns
from loadgen.workload.datasets import DEFAULT_CHARS_PER_TOKEN, SAMPLINGS
from engine_core.scheduling.strategies import strategy_names
from reports import cli as report_cli
from reports.report import ReportOptions
from contract.slo import SLO
from servecap.launch.process import ServerStartError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(2, f"servecap sweep: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="servecap sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="run directory to create, e.g. runs/cmp")
    target = p.add_argument_group("target")
    target.add_argument("--url", help="an external OpenAI-compatible server to observe (vLLM, TGI, Ollama, ...)")
    target.add_argument("--model", default="tiny", help="reference-server preset (default tiny)")
    target.add_argument("--strategies", default="continuous", help=f"comma list of {','.join(strategy_names())}")
    target.add_argument("--server-args", default="", help='extra `servecap serve` flags, e.g. "--max-num-seqs 16"')
    target.add_argument("--emulate", metavar="GPU",
                        help="run the reference server as an emulated GPU replica (`servecap serve --emulate`): the "
                             "real engine core at that GPU's step times and KV room, e.g. h100-sxm with "
                             "--model llama-3.1-8b; more emulation flags ride in --server-args")
    target.add_argument("--model-config", metavar="PATH",
                        help="the served model's HF config.json (or its directory): the report predicts KV bytes "
                             "per token and the KV block count from it (needed for a --url target)")
    plan = p.add_argument_group("load plan (choose one)")
    plan.add_argument("--concurrency", help="closed-loop levels, e.g. 1,2,4,8,16,32")
    plan.add_argument("--rates", help="open-loop arrival rates in requests/s, e.g. 1,2,4,8")
    plan.add_argument("--auto", action="store_true", help="find the knee: ramp concurrency until a p99 SLO breaks, then bisect")
    plan.add_argument("--trace", metavar="PATH", help=TRACE_HELP)
    plan.add_argument("--trace-speedup", type=float, default=1.0, help="divide the trace's times by this")
    plan.add_argument("--arrival", default="poisson", help="open-loop arrivals: poisson | constant | gamma:CV")
    plan.add_argument("--warmup", default="5s", help="warm-up per level (10, 30s, 2m)")
    plan.add_argument("--duration", default="20s", help="measurement window per level (10, 30s, 2m)")
    plan.add_argument("--rounds", type=int, default=1,
                      help="measure each level in this many rounds of --duration/K each, the levels in a serpentine "
                           "order (1,2,4 then 4,2,1 ...), so every level's figures average over the machine's drift "
                           "through the run; round k draws its requests with --seed + k (default 1)")
    plan.add_argument("--round-warmup", default=None,
                      help="warm-up of each round after the first (default: the shorter of --warmup and 2s)")
    classic = p.add_argument_group("classic models (--scenario classify: KServe V2 inference; embed: OpenAI embeddings)")
    classic.add_argument("--scenario", default="chat", choices=("chat", "classify", "embed"),
                         help="chat (default): OpenAI chat completions; classify: KServe V2 inference of the "
                              "reference server's classifier (its batching in --server-args: "
                              "--classifier-max-batch-size, --classifier-preferred-batch-sizes, "
                              "--classifier-max-queue-delay-us, --classifier-instances, --classifier-batching "
                              "on|off), or of any V2 server at --url; embed: POST /v1/embeddings of the reference "
                              "server's embedding model (--embedding-* alike), or of any OpenAI-compatible --url")
    classic.add_argument("--rows", default="1", help="classify: rows per request; embed: inputs per request (each "
                                                     "of --prompt-tokens tokens): N | uniform:LO:HI | ...")
    classic.add_argument("--protocol", default="rest", choices=("rest", "grpc"),
                         help="classify: KServe V2 over REST (JSON) or gRPC (raw tensor bytes)")
    classic.add_argument("--classic-model", "--kserve-model", dest="classic_model",
                         help="classify, embed: the served model's name (default: the reference server's, "
                              "tabular-mlp or servecap-embed)")
    classic.add_argument("--server-args-matrix", metavar="LABEL:FLAGS|...",
                         help="classify: run the same plan against one reference server per entry, each with "
                              "--server-args plus its FLAGS, e.g. \"off:--classifier-batching off|on:\" (the "
                              "serving guides' validation: batching off, then on); the report compares them, "
                              "predictions included")
    classic.add_argument("--grpc-target", help="classify over gRPC with --url: the server's gRPC HOST:PORT "
                                               "(default: --url's host, port 8001)")
    work = p.add_argument_group("workload")
    work.add_argument("--prompt-tokens", default="uniform:32:128", help="N | uniform:LO:HI | normal:M:SD | lognormal:M:S | file:PATH")
    work.add_argument("--output-tokens", default=None,
                      help="same forms as --prompt-tokens (default uniform:16:64; with --dataset the data's lengths)")
    work.add_argument("--reasoning-tokens", metavar="SPEC", help=REASONING_HELP)
    work.add_argument("--dataset", metavar="PATH", help=DATASET_HELP)
    work.add_argument("--dataset-sampling", default="with-replacement", choices=list(SAMPLINGS), help=SAMPLING_HELP)
    work.add_argument("--turns", default="1", help=TURNS_HELP)
    work.add_argument("--think-time", default="0", help="multi-turn: pause between an answer and the next turn")
    work.add_argument("--model-mix", default=None,
                      help="each request's model: NAME:WEIGHT,... ('base' = the base model) or zipf:N[:EXPONENT] "
                           "over lora-1 ... lora-N, e.g. with --server-args \"--enable-lora --random-loras 64\"")
    work.add_argument("--chars-per-token", type=float, default=DEFAULT_CHARS_PER_TOKEN, help=CHARS_HELP)
    work.add_argument("--seed", type=int, default=0)
    slo = p.add_argument_group("SLOs (p99, milliseconds)")
    slo.add_argument("--slo-ttft-ms", type=float)
    slo.add_argument("--slo-tpot-ms", type=float)
    slo.add_argument("--slo-e2e-ms", type=float)
    slo.add_argument("--slo-ttfa-ms", type=float, help="the first answer token (after a reasoning model's reasoning)")
    p.add_argument("--sample-interval", default="0.5", help="sampler and /metrics scrape interval")
    p.add_argument("--no-pin-cpus", action="store_true",
                   help="let the OS place Locust and the server (default: Locust on core 0, the engine process on "
                        "cores of its own; see servecap.sweep.cpu_pinning)")
    p.add_argument("--loadgen-processes", type=int, default=1,
                   help="Locust processes per level (a master and N workers sharing the users or the arrival "
                        "schedule); each gets a core of its own when there are N + 2 cores")
    p.add_argument("--loadgen-external-workers", type=int, default=0,
                   help="Locust workers on other machines that join each level (run there, in a loop, as each "
                        "level's master ends them: locust -f loadgen/chat.py --worker --master-host THIS_HOST "
                        "--master-port PORT); the master waits for them and the local --loadgen-processes")
    p.add_argument("--loadgen-master-bind", default="127.0.0.1",
                   help="where each level's Locust master listens for workers (default 127.0.0.1; 0.0.0.0 or this "
                        "host's address for workers on other machines)")
    p.add_argument("--loadgen-master-port", type=int, default=5557, help="the master's port for workers (default 5557)")
    p.add_argument("--loadgen-worker-wait", default="60s", help="how long a level waits for its workers to join")
    p.add_argument("--loadgen-priority", choices=PRIORITY_MODES, default="realtime",
                   help="Locust's scheduling priority where allowed (root): realtime (default; SCHED_FIFO 1, so a "
                        "chunk's arrival wakes it at once on the core it shares with the server's front end, which "
                        "then gets less of it), nice (nice -10) or normal; falls back to the next where not allowed")
    p.add_argument("--no-loadgen-priority", action="store_const", dest="loadgen_priority", const="normal",
                   help="the same as --loadgen-priority normal")
    p.add_argument("--no-report", action="store_true", help="skip the report (`servecap report`) at the end")
    p.add_argument("--calibrate", action="store_true",
                   help="after a --concurrency sweep, the calibration stage `servecap predict` needs for what-ifs: "
                        "one open-loop level per strategy and one level of 4x longer prompts (RUN/calibrate/; "
                        "servecap.sweep.calibrate_stage)")
    p.add_argument("--diagnostics", action="store_true",
                   help="also measure the machine itself, for a host whose speed drifts (a shared VM): a canary "
                        "process times each core (canary.csv, the host's steal time), and a level's stability is "
                        "judged at the machine's usual speed from the engine's steps; the report then shows them")
    return p


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    return SweepConfig(
        out_dir=args.out, url=args.url, model=args.model,
        strategies=tuple(s.strip() for s in args.strategies.split(",") if s.strip()),
        server_args=f"{args.server_args} --emulate {shlex.quote(args.emulate)}" if args.emulate else args.server_args,
        concurrency=parse_number_list(args.concurrency, "--concurrency", int) if args.concurrency else (),
        rates=parse_number_list(args.rates, "--rates") if args.rates else (),
        auto=args.auto, arrival=args.arrival,
        warmup_s=parse_duration(args.warmup, "--warmup"), duration_s=parse_duration(args.duration, "--duration"),
        rounds=args.rounds,
        round_warmup_s=parse_duration(args.round_warmup, "--round-warmup") if args.round_warmup else None,
        prompt_tokens=args.prompt_tokens, seed=args.seed,
        # the default applies without a dataset or a trace, which carry their own lengths
        output_tokens=args.output_tokens if args.output_tokens or args.dataset or args.trace else "uniform:16:64",
        dataset=args.dataset, dataset_sampling=args.dataset_sampling, chars_per_token=args.chars_per_token,
        turns=parse_turns(args.turns), think_time_s=parse_duration(args.think_time, "--think-time"),
        model_mix=args.model_mix, reasoning_tokens=args.reasoning_tokens, trace=args.trace, trace_speedup=args.trace_speedup,
        slo=SLO(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2e_ms, args.slo_ttfa_ms),
        sample_interval_s=parse_duration(args.sample_interval, "--sample-interval"),
        pin_cpus=not args.no_pin_cpus, model_config=args.model_config, loadgen_processes=args.loadgen_processes,
        loadgen_external_workers=args.loadgen_external_workers, loadgen_master_bind=args.loadgen_master_bind,
        loadgen_master_port=args.loadgen_master_port,
        loadgen_worker_wait_s=parse_duration(args.loadgen_worker_wait, "--loadgen-worker-wait"),
        loadgen_priority=args.loadgen_priority, diagnostics=args.diagnostics,
        scenario=args.scenario, rows=args.rows, protocol=args.protocol, classic_model=args.classic_model,
        grpc_target=args.grpc_target,
        server_args_matrix=parse_server_args_matrix(args.server_args_matrix) if args.server_args_matrix else (),
    )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        config = config_from_args(args)
        # built before the sweep: a bad value fails before any load
        report_options = ReportOptions(slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms,
                                       slo_e2e_ms=args.slo_e2e_ms, slo_ttfa_ms=args.slo_ttfa_ms, model_config=args.model_config,
                                       diagnostics=args.diagnostics)
        if args.calibrate:
            if config.scenario != "chat":
                raise ValueError("--calibrate fits the LLM step model: it needs --scenario chat")
            check_calibrate(config)
        sweep = Sweep(config, console)
        out = sweep.run()
        if args.calibrate and sweep.run_json.info.status == "complete":
            run_stage(config, out, console)
    except (ValueError, ServerStartError) as exc:
        print(f"servecap sweep: error: {exc}", file=sys.stderr)  # plain: never wrapped mid-message
        return 2
    if args.no_report:   # else the report's own warnings say the same, grouped, after its answer
        for line in sweep.grouped_warnings():
            console.print(line, markup=False, highlight=False)
        console.print(f"run directory: {out}")
        return 0
    return report_cli.report(out, report_options)   # in this process: reports pulls in no torch


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
