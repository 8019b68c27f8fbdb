"""`servecap serve` (also `python -m reference_server`): flags -> configs -> the serving process.

Bad flags or values print a message naming the problem and exit 2; a taken port exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys

from contract.disaggregation import add_kv_link_arguments
from contract.options import CommandParser, add_options
from contract.reasoning_effort import DEFAULT_EFFORT_TOKENS
from engine_core.options import SPECULATIVE, EngineOptions
from reference_server.classifier.batching_settings import BatcherOptions   # no torch
from reference_server.engine.lora_sources import adapter_rank   # json only: no torch
from engine_core.scheduling.strategies import DEFAULT_STRATEGY  # pure: no torch
from engine_core.scheduling.strategies.flags import add_limit_arguments, limit_values

API_KEY_ENV = "SERVECAP_API_KEY"
GIB = 1 << 30
# the engine's options as this server fills them in when left out (dtype: float32, an emulated GPU's bf16)
SERVE_DEFAULTS = {"model": "tiny", "device": "cpu", "strategy": DEFAULT_STRATEGY, "num_speculative_tokens": 0,
                  "max_loras": 1}


def _cpu_list(text: str) -> tuple[int, ...]:
    """'1' / '2-15' / '0,2,4-7' (taskset -c syntax) -> sorted core numbers."""
    cores: set[int] = set()
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            low, _, high = part.partition("-")
            cores.update(range(int(low), int(high or low) + 1))
    except ValueError:
        cores = set()
    if not cores or min(cores) < 0:
        raise argparse.ArgumentTypeError(f"expected core numbers like 1 or 2-15 or 0,2,4-7, got {text!r}")
    return tuple(sorted(cores))


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="servecap serve",
        description="Run the reference serving process: OpenAI-compatible /v1, KServe V2 /v2, "
                    "/health, /ready, /metrics.",
        allow_abbrev=False)
    engine = ("model", "device", "dtype", "strategy", "seed", "num-threads")
    add_options(p, EngineOptions, title="engine", only=engine, typed=True)
    proc = p.add_argument_group("engine process")
    proc.add_argument("--engine-mode", choices=("process", "thread"), default="process",
                      help="run the engine in its own process (default; no GIL shared with the HTTP "
                           "event loop) or on a thread of the serving process")
    proc.add_argument("--engine-cpus", type=_cpu_list, default=(),
                      help="pin the engine process to these cores (taskset -c syntax: 1, 2-15, 0,2,4-7)")
    emulated = ("emulated GPU", "no forward pass: each step waits the time this GPU would take for its batch; KV "
                "cache and batching limits as its engine would size them there (--dtype: the GPU's, default bf16)")
    emu = p.add_argument_group(*emulated)
    emu.add_argument("--emulate", metavar="GPU", help="a catalog GPU id (`servecap calc gpus`), e.g. h100-sxm; "
                     "--model is then any catalog model and --dtype the GPU's (bf16, fp16, fp8, int8, int4)")
    emu.add_argument("--emulate-engine", choices=("vllm", "tensorrt-llm"), default="vllm",
                     help="whose sizing rule and default limits (default vllm)")
    emu.add_argument("--step-jitter", type=float, default=None, metavar="CV",
                     help="a seeded per-step variation of this coefficient of variation (default 0: deterministic)")
    emu.add_argument("--role", choices=("both", "prefill", "decode"), default=None,
                     help="disaggregated prefill and decode behind `vllm-router --vllm-pd-disaggregation`: "
                          "prefill answers the router's one-token calls with the KV's blocks, decode takes a "
                          "prompt's KV from one instead of computing it (default both: either)")
    add_kv_link_arguments(emu)
    add_options(p, EngineOptions, title="emulated GPU: its replica",
                only=("tp", "dp", "expert-parallel", "gpu-memory-utilization"), typed=True)
    add_options(p, EngineOptions, title="speculative decoding (continuous strategy)", only=SPECULATIVE, typed=True,
                description="proposals verified in one pass per step: greedy requests keep what the target agrees "
                            "with, sampled ones by rejection sampling; --speculative-acceptance emulates acceptance "
                            "(the only mode with --emulate)")
    spec = p.add_argument_group("prompt lookup (--speculative-method ngram)")
    spec.add_argument("--prompt-lookup-max", type=int, default=4, help="longest n-gram matched (default 4)")
    spec.add_argument("--prompt-lookup-min", type=int, default=1, help="shortest n-gram matched (default 1)")
    p.add_argument("--quantization", choices=("int8", "int8-dynamic"), default=None,
                   help="int8 weights, a scale per output channel: int8 weight-only (activations in --dtype), "
                        "int8-dynamic with int8 activations too (float32 on a CPU)")
    lora = p.add_argument_group("LoRA adapters (vLLM's interface; continuous strategy)")
    lora.add_argument("--enable-lora", action="store_true", help="serve LoRA adapters; a request names one as model")
    lora.add_argument("--lora-modules", nargs="+", default=[], metavar="NAME=SOURCE",
                      help="adapters: SOURCE a PEFT directory, 'random' or 'random:RANK' (seeded pairs)")
    lora.add_argument("--random-loras", type=int, default=0, metavar="N",
                      help="N more seeded random adapters of rank --max-lora-rank, named lora-1 ... lora-N")
    add_options(p, EngineOptions, title="LoRA slots", only=("max-loras", "max-lora-rank"), typed=True)
    add_options(p, EngineOptions, title="KV cache", only=("block-size", "kv-blocks", "max-model-len"), typed=True)
    p.add_argument("--kv-memory-gib", type=float, default=None, help="KV-cache budget in GiB (instead of --kv-blocks)")
    lim = p.add_argument_group("batching limits", "each strategy's own (all accepted; the chosen one's apply)")
    add_limit_arguments(lim)
    lim.add_argument("--inject-step-delay-ms", type=float, default=0.0, help="fault injection: sleep per step")
    p.set_defaults(**SERVE_DEFAULTS)
    srv = p.add_argument_group("serving")
    srv.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    srv.add_argument("--port", type=int, default=8000, help="TCP port; 0 = any free port (printed when ready)")
    srv.add_argument("--served-model-name", default=None, help="the model name clients send (default --model)")
    srv.add_argument("--replica-name", default=None, metavar="NAME",
                     help="this server's name in a fleet: every response carries it in the x-servecap-replica "
                          "header, so a client behind a router records which replica answered")
    srv.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                     help=f"require 'Authorization: Bearer KEY' on /v1 and /v2 (default ${API_KEY_ENV})")
    srv.add_argument("--reasoning-tokens", default=None, metavar="DIST",
                     help="chat requests reason first, as reasoning models do: a draw of this many tokens (256, "
                          "uniform:128:512, ...) streams as delta.reasoning_content before the answer; a request's "
                          "own reasoning_tokens field overrides it")
    srv.add_argument("--reasoning-effort-tokens", default="", metavar="EFFORT=DIST,...",
                     help="what a chat request's reasoning_effort reasons for: a draw of its DIST (default "
                          f"{DEFAULT_EFFORT_TOKENS}; 'none' never reasons), e.g. low=128,high=uniform:2048:8192")
    srv.add_argument("--max-waiting", type=int, default=None,
                     help="generation requests waiting for their first token before new ones get 429")
    srv.add_argument("--stream-interval", type=int, default=1, metavar="N",
                     help="tokens per streamed chunk after the first, as vLLM's flag (default 1: every token); "
                          "fewer chunks spare the front end and the client at high concurrency")
    srv.add_argument("--retry-after-s", type=int, default=1, help="Retry-After seconds on 429/503")
    srv.add_argument("--drain-grace-s", type=float, default=30.0, help="SIGTERM: time in-flight requests get")
    srv.add_argument("--max-body-bytes", type=int, default=1 << 20, help="larger request bodies get 413")
    srv.add_argument("--keep-alive-s", type=float, default=30.0, help="idle keep-alive connection timeout")
    srv.add_argument("--log-level", default="warning", help="uvicorn log level")
    srv.add_argument("--tool-call-rate", type=float, default=0.0, metavar="R",
                     help="with tools offered and tool_choice auto, the share of chat replies that call one "
                          "(seeded; default 0; required and a named function always call)")
    srv.add_argument("--fault", action="append", default=[], metavar="SPEC",
                     help="a fault to rehearse, repeatable: slow:factor=3,at=10s,for=30s | "
                          "errors:status=503,rate=0.5,at=0,for=20s | stall:at=5s,for=10s | crash:at=60s "
                          "(also at run time: POST /admin/faults from loopback)")
    srv.add_argument("--grpc-port", type=int, default=None,
                     help="also serve KServe V2 over gRPC on this port (0: any free one; Triton's default is 8001)")
    cls = p.add_argument_group("classifier (KServe V2 at /v2/models/NAME)")
    cls.add_argument("--no-classifier", action="store_true", help="do not serve the classifier")
    cls.add_argument("--classifier-name", default="tabular-mlp")
    cls.add_argument("--classifier-features", type=int, default=16, help="input width F")
    cls.add_argument("--classifier-classes", type=int, default=4, help="output classes C")
    cls.add_argument("--classifier-hidden", type=int, default=64, help="MLP hidden width")
    add_options(p, BatcherOptions, title="the classifier's batcher (items: rows)", prefix="classifier", typed=True)
    emb = p.add_argument_group("embedding model (OpenAI POST /v1/embeddings)")
    emb.add_argument("--no-embedding", action="store_true", help="do not serve the embedding model")
    emb.add_argument("--embedding-name", default="servecap-embed", help="the model requests name")
    emb.add_argument("--embedding-dim", type=int, default=128)
    emb.add_argument("--embedding-layers", type=int, default=2)
    emb.add_argument("--embedding-max-input-tokens", type=int, default=512, help="longest input (bytes)")
    add_options(p, BatcherOptions, title="the embedding model's batcher (items: inputs)", prefix="embedding",
                typed=True)
    return p


def embedding_config_from_args(args: argparse.Namespace):
    """The embedding model's EmbeddingConfig; ValueError names the bad field."""
    from reference_server.embedding.config import EmbeddingConfig

    return EmbeddingConfig(
        enabled=not args.no_embedding, name=args.embedding_name, dim=args.embedding_dim, layers=args.embedding_layers,
        max_input_tokens=args.embedding_max_input_tokens, seed=args.seed,
        **BatcherOptions.from_args(args, "embedding").config_fields())


def configs_from_args(args: argparse.Namespace):
    """(EngineConfig, ServerConfig, ClassifierConfig); ValueError names the bad field."""
    from reference_server.api.settings import ServerConfig
    from reference_server.classifier.config import ClassifierConfig
    from reference_server.engine.config import EngineConfig

    if args.kv_memory_gib is not None and args.kv_memory_gib <= 0:
        raise ValueError(f"--kv-memory-gib must be positive, got {args.kv_memory_gib}")
    limits, block_size = limit_values(args), args.block_size
    emulation = {}
    if args.emulate is not None:
        emulation, limits, block_size = _emulation(args, limits)
    else:
        for flag, value in (("--tp", args.tp), ("--dp", args.dp), ("--expert-parallel", args.expert_parallel or None),
                            ("--gpu-memory-utilization", args.gpu_memory_utilization),
                            ("--step-jitter", args.step_jitter), ("--role", args.role),
                            ("--kv-transfer-gbs", args.kv_transfer_gbs),
                            ("--kv-transfer-latency-us", args.kv_transfer_latency_us)):
            if value is not None:
                raise ValueError(f"{flag} describes an emulated GPU: give --emulate GPU too")
    engine = EngineConfig.from_flags(
        model=args.model, device=args.device, dtype=args.dtype or ("bf16" if args.emulate else "float32"),
        strategy=args.strategy, seed=args.seed,
        block_size=16 if block_size is None else block_size, kv_blocks=args.kv_blocks,
        kv_memory_bytes=None if args.kv_memory_gib is None else int(args.kv_memory_gib * GIB),
        max_model_len=args.max_model_len, inject_step_delay_ms=args.inject_step_delay_ms,
        num_threads=args.num_threads, stream_interval=args.stream_interval,
        speculative_method=args.speculative_method, num_speculative_tokens=args.num_speculative_tokens,
        prompt_lookup_max=args.prompt_lookup_max, prompt_lookup_min=args.prompt_lookup_min,
        speculative_model=args.speculative_model, quantization=args.quantization, speculative_acceptance=args.speculative_acceptance,
        enable_lora=args.enable_lora, lora_modules=lora_modules(args), max_loras=args.max_loras,
        max_lora_rank=args.max_lora_rank,
        **emulation, **limits)
    if engine.quantization is not None:   # the kernel is torch's: ask it now, so a flag without one exits 2
        import torch

        from reference_server.engine.model_runner import TORCH_DTYPES
        from reference_server.engine.quantization import require_kernel

        require_kernel(engine.quantization, TORCH_DTYPES[engine.dtype], torch.device(engine.device))
    server = ServerConfig(
        host=args.host, port=args.port, served_model_name=args.served_model_name, api_key=args.api_key or None,
        max_waiting=args.max_waiting, retry_after_s=args.retry_after_s, drain_grace_s=args.drain_grace_s,
        max_body_bytes=args.max_body_bytes, keep_alive_s=args.keep_alive_s, grpc_port=args.grpc_port,
        reasoning_tokens=args.reasoning_tokens, reasoning_effort_tokens=args.reasoning_effort_tokens,
        log_level=args.log_level, engine_mode=args.engine_mode, engine_cpus=args.engine_cpus,
        replica_name=args.replica_name, faults=tuple(args.fault), tool_call_rate=args.tool_call_rate)
    classifier = ClassifierConfig(
        enabled=not args.no_classifier, name=args.classifier_name, num_features=args.classifier_features,
        num_classes=args.classifier_classes, hidden_size=args.classifier_hidden, seed=args.seed,
        **BatcherOptions.from_args(args, "classifier").config_fields())
    return engine, server, classifier


def lora_modules(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """--lora-modules NAME=SOURCE ... and --random-loras N as (name, source) pairs; ValueError names a bad one."""
    pairs = []
    for item in args.lora_modules:
        name, sep, source = item.partition("=")
        if not sep or not name or not source:
            raise ValueError(f"--lora-modules {item!r}: expected NAME=SOURCE (a PEFT directory, random or random:RANK)")
        pairs.append((name, source))
    if args.random_loras < 0:
        raise ValueError(f"--random-loras must be >= 0, got {args.random_loras}")
    pairs += [(f"lora-{i}", "random") for i in range(1, args.random_loras + 1)]
    if pairs and not args.enable_lora:
        raise ValueError("--lora-modules and --random-loras need --enable-lora")
    served = args.served_model_name or (os.path.basename(os.path.normpath(args.model)) if os.sep in args.model
                                         else args.model)   # the base model's name (api.runtime's rule)
    for name, source in pairs:   # a missing directory or a rank above the slots: exit 2, not a failed start
        if name == served:
            raise ValueError(f"--lora-modules: adapter name {name!r} is the base model's: requests could not "
                             "reach the base (give the adapter another name)")
        adapter_rank(name, source, args.max_lora_rank)
    return tuple(pairs)


def _emulation(args: argparse.Namespace, limits: dict) -> tuple[dict, dict, int]:
    """--emulate's EngineConfig fields, the limits with the engine's defaults where no flag gave one, and
    the engine's block size; ValueError names a flag the emulation cannot honour."""
    from calculators.engine_profiles import engine_defaults
    from engine_core.gpus import get_gpu

    for flag, given in (("--kv-blocks", args.kv_blocks is not None), ("--kv-memory-gib", args.kv_memory_gib is not None),
                        ("--device", args.device != "cpu")):
        if given:
            raise ValueError(f"{flag} cannot be honoured with --emulate: the emulated GPU runs no forward pass "
                             "and sizes its KV cache as its engine would on that GPU")
    defaults = engine_defaults(args.emulate_engine, get_gpu(args.emulate))
    if args.block_size is not None and args.block_size != defaults.block_size:
        raise ValueError(f"--block-size {args.block_size}: {args.emulate_engine} uses {defaults.block_size}-token "
                         "blocks (leave it out with --emulate)")
    emulation = {"emulate": args.emulate, "emulate_engine": args.emulate_engine, "tp": args.tp or 1,
                 "dp": args.dp or 1, "expert_parallel": args.expert_parallel,
                 "gpu_memory_utilization": args.gpu_memory_utilization, "step_jitter_cv": args.step_jitter or 0.0,
                 "role": args.role or "both", "kv_transfer_gbs": args.kv_transfer_gbs,
                 "kv_transfer_latency_s": (args.kv_transfer_latency_us or 0.0) / 1e6}
    limits = {**defaults.limit_flags(), **limits}
    for name in ("max_num_seqs", "max_num_batched_tokens"):   # each of --dp's ranks has its own
        if limits.get(name) is not None:
            limits[name] *= emulation["dp"]
    return emulation, limits, defaults.block_size


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)   # bad flags: exit 2
    try:
        engine_config, server_config, classifier_config = configs_from_args(args)
        embedding_config = embedding_config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))   # exit 2 with the message
    from reference_server.api.server import bind_socket, run_server
    try:
        sock = bind_socket(server_config.host, server_config.port)
    except OSError as exc:
        print(f"servecap serve: error: cannot listen on {server_config.host}:{server_config.port}: {exc}",
              file=sys.stderr)
        return 1
    from prometheus_client import disable_created_metrics

    from reference_server.api.app import create_app
    disable_created_metrics()   # no *_created series: half the /metrics text, nothing lost
    return run_server(create_app(engine_config, server_config, classifier_config, embedding_config=embedding_config),
                      server_config, sock)


if __name__ == "__main__":
    raise SystemExit(main())
