"""`servecap serve` (also `python -m reference_server`): flags -> configs -> the serving process.

Bad flags or values print a message naming the problem and exit 2; a taken port exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys

from contract.reasoning_effort import DEFAULT_EFFORT_TOKENS
from reference_server.engine.lora_sources import adapter_rank   # json only: no torch
from engine_core.scheduling.speculative import parse_acceptance
from engine_core.scheduling.strategies import DEFAULT_STRATEGY, STRATEGIES  # pure: no torch
from engine_core.scheduling.strategies.flags import add_limit_arguments, limit_values
from engine_core.scheduling.strategies.limits import parse_int_list

API_KEY_ENV = "SERVECAP_API_KEY"
GIB = 1 << 30


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
    p = argparse.ArgumentParser(
        prog="servecap serve",
        description="Run the reference serving process: OpenAI-compatible /v1, KServe V2 /v2, "
                    "/health, /ready, /metrics.",
        allow_abbrev=False)
    eng = p.add_argument_group("engine")
    eng.add_argument("--model", default="tiny", help="preset (tiny, small, llama-3.1-8b, ...) or checkpoint dir")
    eng.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    eng.add_argument("--dtype", default=None, help="float32 | bfloat16 | float16 (fp32/bf16/fp16; default float32); "
                     "emulated: the GPU's, bf16 | fp16 | fp8 | int8 | int4 (default bf16)")
    eng.add_argument("--strategy", default=DEFAULT_STRATEGY,
                     help="; ".join(f"{spec.name}: {spec.summary}" for spec in STRATEGIES.values()))
    eng.add_argument("--seed", type=int, default=0, help="weights and default sampling seed")
    eng.add_argument("--num-threads", type=int, default=None, help="torch CPU threads")
    eng.add_argument("--engine-mode", choices=("process", "thread"), default="process",
                     help="run the engine in its own process (default; no GIL shared with the HTTP "
                          "event loop) or on a thread of the serving process")
    eng.add_argument("--engine-cpus", type=_cpu_list, default=(),
                     help="pin the engine process to these cores (taskset -c syntax: 1, 2-15, 0,2,4-7)")
    emu = p.add_argument_group("emulated GPU", "no forward pass: each step waits the time this GPU would take "
                               "for its batch; KV cache and batching limits as its engine would size them there")
    emu.add_argument("--emulate", metavar="GPU", help="a catalog GPU id (`servecap calc gpus`), e.g. h100-sxm; "
                     "--model is then any catalog model and --dtype the GPU's (bf16, fp16, fp8, int8, int4)")
    emu.add_argument("--emulate-engine", choices=("vllm", "tensorrt-llm"), default="vllm",
                     help="whose sizing rule and default limits (default vllm)")
    emu.add_argument("--tp", type=int, default=None, help="tensor-parallel GPUs of the emulated replica (default 1)")
    emu.add_argument("--gpu-memory-utilization", type=float, default=None,
                     help="the emulated engine's memory share (default: the engine's, 0.9)")
    emu.add_argument("--step-jitter", type=float, default=None, metavar="CV",
                     help="a seeded per-step variation of this coefficient of variation (default 0: deterministic)")
    spec = p.add_argument_group("speculative decoding (continuous strategy)",
                                "proposals verified in one pass per step: greedy requests keep what the target "
                                "agrees with, sampled ones by rejection sampling")
    spec.add_argument("--speculative-method", choices=("draft", "ngram"), default=None,
                      help="ngram: prompt lookup, as vLLM's (the continuation of the latest earlier match); "
                           "draft: a smaller model proposes (--speculative-model)")
    spec.add_argument("--num-speculative-tokens", type=int, default=0, metavar="K", help="proposals per step")
    spec.add_argument("--speculative-model", default=None, metavar="PRESET|CHECKPOINT",
                      help="the draft model, sharing the tokenizer (emulated: a catalog model)")
    spec.add_argument("--speculative-acceptance", default=None, metavar="A[,A...]",
                      help="emulated acceptance: one rate, or one per position as vLLM reports them; seeded draws "
                           "decide what is kept (the only mode with --emulate)")
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
    lora.add_argument("--max-loras", type=int, default=1, help="adapters resident at once (default 1)")
    lora.add_argument("--max-lora-rank", type=int, default=16, help="the largest adapter rank (default 16)")
    kv = p.add_argument_group("KV cache")
    kv.add_argument("--block-size", type=int, default=None, help="tokens per KV block (default 16; "
                    "emulated: the engine's)")
    kv.add_argument("--kv-blocks", type=int, default=None, help="KV block count")
    kv.add_argument("--kv-memory-gib", type=float, default=None, help="KV-cache budget in GiB (instead of --kv-blocks)")
    kv.add_argument("--max-model-len", type=int, default=None, help="longest prompt + output")
    lim = p.add_argument_group("batching limits", "each strategy's own (all accepted; the chosen one's apply)")
    add_limit_arguments(lim)
    lim.add_argument("--inject-step-delay-ms", type=float, default=0.0, help="fault injection: sleep per step")
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
    cls = p.add_argument_group("classifier (KServe V2 at /v2/models/NAME)")
    cls.add_argument("--no-classifier", action="store_true", help="do not serve the classifier")
    cls.add_argument("--classifier-name", default="tabular-mlp")
    cls.add_argument("--classifier-features", type=int, default=16, help="input width F")
    cls.add_argument("--classifier-classes", type=int, default=4, help="output classes C")
    cls.add_argument("--classifier-hidden", type=int, default=64, help="MLP hidden width")
    cls.add_argument("--classifier-max-batch-size", type=int, default=32, help="most rows per forward pass")
    cls.add_argument("--classifier-preferred-batch-sizes", type=parse_int_list, default=(), help="e.g. 8,16")
    cls.add_argument("--classifier-max-queue-delay-us", type=int, default=2000, help="longest wait for a batch")
    cls.add_argument("--classifier-max-waiting", type=int, default=None, help="queued requests before 429")
    cls.add_argument("--classifier-batching", choices=("on", "off"), default="on",
                     help="off: every request runs alone (Triton's model without a dynamic batcher)")
    cls.add_argument("--classifier-instances", type=int, default=1,
                     help="model instances serving the queue in parallel (Triton's instance_group count)")
    emb = p.add_argument_group("embedding model (OpenAI POST /v1/embeddings)")
    emb.add_argument("--no-embedding", action="store_true", help="do not serve the embedding model")
    emb.add_argument("--embedding-name", default="servecap-embed", help="the model requests name")
    emb.add_argument("--embedding-dim", type=int, default=128)
    emb.add_argument("--embedding-layers", type=int, default=2)
    emb.add_argument("--embedding-max-input-tokens", type=int, default=512, help="longest input (bytes)")
    emb.add_argument("--embedding-max-batch-size", type=int, default=32, help="most inputs per forward pass")
    emb.add_argument("--embedding-preferred-batch-sizes", type=parse_int_list, default=(), help="e.g. 8,16")
    emb.add_argument("--embedding-max-queue-delay-us", type=int, default=2000)
    emb.add_argument("--embedding-instances", type=int, default=1)
    emb.add_argument("--embedding-batching", choices=("on", "off"), default="on")
    cls.add_argument("--grpc-port", type=int, default=None,
                     help="also serve KServe V2 over gRPC on this port (0: any free one; Triton's default is 8001)")
    return p


def embedding_config_from_args(args: argparse.Namespace):
    """The embedding model's EmbeddingConfig; ValueError names the bad field."""
    from reference_server.embedding.config import EmbeddingConfig

    return EmbeddingConfig(
        enabled=not args.no_embedding, name=args.embedding_name, dim=args.embedding_dim, layers=args.embedding_layers,
        max_input_tokens=args.embedding_max_input_tokens, seed=args.seed, max_batch_size=args.embedding_max_batch_size,
        preferred_batch_sizes=args.embedding_preferred_batch_sizes, max_queue_delay_us=args.embedding_max_queue_delay_us,
        dynamic_batching=args.embedding_batching == "on", instances=args.embedding_instances)


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
        for flag, value in (("--tp", args.tp), ("--gpu-memory-utilization", args.gpu_memory_utilization),
                            ("--step-jitter", args.step_jitter)):
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
        speculative_model=args.speculative_model, quantization=args.quantization, speculative_acceptance=None if args.speculative_acceptance is None else parse_acceptance(args.speculative_acceptance),
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
        replica_name=args.replica_name)
    classifier = ClassifierConfig(
        enabled=not args.no_classifier, name=args.classifier_name, num_features=args.classifier_features,
        num_classes=args.classifier_classes, hidden_size=args.classifier_hidden, seed=args.seed,
        max_batch_size=args.classifier_max_batch_size,
        preferred_batch_sizes=args.classifier_preferred_batch_sizes,
        max_queue_delay_us=args.classifier_max_queue_delay_us, max_waiting=args.classifier_max_waiting,
        dynamic_batching=args.classifier_batching == "on", instances=args.classifier_instances)
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
    from calculators.gpu_engine import engine_defaults
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
                 "gpu_memory_utilization": args.gpu_memory_utilization, "step_jitter_cv": args.step_jitter or 0.0}
    return emulation, {**defaults.limit_flags(), **limits}, defaults.block_size


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
