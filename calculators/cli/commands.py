"""``servecap calc``: each calculator as a subcommand. Bad input exits 2 with one clear line."""

from __future__ import annotations

import sys
from dataclasses import asdict, replace

from calculators import batch_queue, cost, fleet, queueing
from calculators.cli.args import build_parser
from calculators.cli.calibrate_command import cmd_calibrate
from calculators.cli.level_pool import level_pool
from calculators.cli.sessions_command import simulate_sessions_command
from calculators.cli.topology_command import simulate_topologies
from calculators.cli.crossover_command import check_crossover_flags, crossover_command
from calculators.cli.inputs import (gpu_from_args, lengths, load_from_args, mean_lengths,
                                    mean_tokens, profile_from_args)
from calculators.cli.output import GIB, as_dict, emit, print_json, print_rows, print_speculative
from engine_core.dtypes import default_kv_dtype
from calculators.fit import fit
from calculators.engine_profiles import engine_defaults
from calculators.gpu_engine import gpu_engine
from calculators.moe_layout import MoeLayout
from engine_core.gpus import _catalog as gpu_catalog, gpu_names
from calculators.kv import kv
from engine_core.models import get_model, model_names, resolve_model
from calculators.roofline import roofline
from calculators.speculative import Speculation, speculative_decode
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline
from calculators.weights import weights
from engine_core.options import SPECULATIVE, EngineOptions
from calculators.whatif import what_if
from contract.slo import slo_from_args


def _model(args):
    if args.model is None:
        raise ValueError("give --model (a catalog model: `servecap calc models`, or a config.json)")
    return resolve_model(args.model)


def _or(value, default):
    return default if value is None else value


def cmd_kv(args) -> None:
    kv_dtype = args.kv_dtype or default_kv_dtype(args.dtype)
    result = kv(_model(args), kv_dtype, tp=args.tp,
                prompt_tokens=_or(mean_tokens(args.prompt_tokens, "--prompt-tokens"), 0),
                output_tokens=_or(mean_tokens(args.output_tokens, "--output-tokens"), 0),
                block_size=_or(args.block_size, 16))
    emit(args, "KV cache", result)


def cmd_weights(args) -> None:
    result = weights(_model(args), args.dtype, keep_embeddings_16bit=args.keep_embeddings_16bit)
    emit(args, "Weights", {**asdict(result), "tp": args.tp, "weight_bytes_per_gpu": result.bytes_per_gpu(args.tp)})


def cmd_fit(args) -> None:
    gpu = gpu_from_args(args)
    vllm = engine_defaults("vllm", gpu)   # the one sizing rule `servecap serve --emulate` uses too
    max_num_seqs = getattr(args, "max_num_seqs", vllm.max_num_seqs)
    tokens = getattr(args, "max_num_batched_tokens", vllm.max_num_batched_tokens)
    prompt_tokens = mean_tokens(args.prompt_tokens, "--prompt-tokens")   # None: sized by --max-model-len
    output_tokens = mean_tokens(args.output_tokens, "--output-tokens")
    layout = MoeLayout.from_args(args)
    layout.check(_model(args), args.tp)
    result = fit(_model(args), gpu, dtype=args.dtype, kv_dtype=args.kv_dtype, dp=layout.dp,
                 gpus=args.gpus,
                 tp=args.tp, gpu_memory_utilization=_or(args.gpu_memory_utilization, vllm.gpu_memory_utilization),
                 activation_gib=args.activation_gib, non_torch_gib=args.non_torch_gib,
                 block_size=_or(args.block_size, vllm.block_size),
                 max_model_len=args.max_model_len, prompt_tokens=prompt_tokens,
                 output_tokens=output_tokens, keep_embeddings_16bit=args.keep_embeddings_16bit,
                 max_num_batched_tokens=tokens, max_num_seqs=max_num_seqs, max_loras=_or(args.max_loras, 0),
                 max_lora_rank=args.max_lora_rank)
    speed = None
    if result.fits and result.max_concurrency_at_mean:
        speed = what_if(_model(args), gpu_from_args(args), dtype=args.dtype, kv_dtype=args.kv_dtype,
                        tp=args.tp,
                        prompt_tokens=prompt_tokens or 1, output_tokens=output_tokens or 1,
                        concurrency=min(max_num_seqs * layout.dp, result.max_concurrency_at_mean),
                        profile=profile_from_args(args), engine=args.engine, layout=layout)
    if args.json:
        return print_json({**asdict(result), "predicted": None if speed is None else asdict(speed)})
    emit(args, "Fit (per GPU)", result)
    if speed is not None:
        emit(args, f"Predicted at this fit: {speed.concurrency} requests of {speed.prompt_tokens} + "
                   f"{speed.output_tokens} tokens", speed)
    if not result.fits:
        print(result.reason, file=sys.stderr)


def cmd_roofline(args) -> None:
    layout = MoeLayout.from_args(args)
    if not layout.plain and speculation_from_args(args) is not None:
        raise ValueError("--speculative-* with --dp or --expert-parallel: speculative decoding is timed for tensor "
                         "parallelism alone")
    result = roofline(_model(args), gpu_from_args(args), dtype=args.dtype, kv_dtype=args.kv_dtype,
                      batch=args.batch, context=args.context,
                      prompt_tokens=_or(mean_tokens(args.prompt_tokens, "--prompt-tokens"), 0), tp=args.tp,
                      profile=profile_from_args(args), engine=args.engine,
                      bandwidth_efficiency=args.bandwidth_efficiency, compute_efficiency=args.compute_efficiency,
                      overhead_s=None if args.overhead_ms is None else args.overhead_ms / 1e3, layout=layout)
    speculation = speculation_from_args(args)
    if speculation is None:
        emit(args, "Roofline (per GPU)", result)
        return
    answer = speculative_decode(resolve_model(args.model), gpu_from_args(args), speculation, dtype=args.dtype,
                                kv_dtype=args.kv_dtype, tp=args.tp, context=args.context,
                                profile=profile_from_args(args), engine=args.engine)
    if args.json:
        print_json({"roofline": as_dict(result), "speculative": as_dict(answer)})
        return
    emit(args, "Roofline (per GPU)", result)
    print_speculative(answer)


def speculation_from_args(args) -> Speculation | None:
    """The --speculative-* options as a Speculation, None without them; ValueError naming a flag."""
    options = EngineOptions.from_args(args, only=SPECULATIVE)
    if not options.speculating():
        return None
    options.check_speculation()
    draft = resolve_model(options.speculative_model) if options.speculative_model else None
    return Speculation(options.speculative_method, options.num_speculative_tokens, options.speculative_acceptance,
                       draft)


def cmd_queue(args) -> None:
    if args.queue == "batch":
        max_batch_size = getattr(args, "max_batch_size", None)   # a limit left out is absent
        missing = [flag for flag, value in (("--batch-base-ms", args.batch_base_ms),
                                            ("--batch-per-item-ms", args.batch_per_item_ms),
                                            ("--max-batch-size", max_batch_size)) if value is None]
        if missing:
            raise ValueError(f"--queue batch needs {', '.join(missing)}")
        result = batch_queue.batch_queue(args.arrival_rate, args.batch_base_ms / 1e3, args.batch_per_item_ms / 1e3,
                                         max_batch_size)
        return emit(args, "Batch-service queue", result)
    if args.service_rate is None:
        raise ValueError(f"--queue {args.queue} needs --service-rate")
    if args.queue == "mmc":
        result = queueing.mmc(args.arrival_rate, args.service_rate, args.servers)
    elif args.queue == "md1":
        result = queueing.md1(args.arrival_rate, args.service_rate)
    elif args.queue == "mg1":
        result = queueing.mg1(args.arrival_rate, args.service_rate, args.service_cv2)
    else:
        result = queueing.ggc(args.arrival_rate, args.service_rate, args.servers, arrival_cv2=args.arrival_cv2,
                              service_cv2=args.service_cv2)
    emit(args, f"Queue ({args.queue})", result)


def cmd_fleet(args) -> None:
    if (args.replica_capacity is None) == (args.model is None or args.gpu is None):
        raise ValueError("give either --replica-capacity or both --model and --gpu")
    hourly = None
    if args.replica_capacity is not None:
        replica = fleet.replica(args.replica_capacity, args.replica_slots)
        hourly = args.gpu_hourly
    else:
        gpu = gpu_from_args(args)
        prompt_tokens, output_tokens = mean_lengths(args)
        replica = fleet.replica_from_roofline(resolve_model(args.model), gpu, dtype=args.dtype, tp=args.tp,
                                              prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                                              profile=profile_from_args(args), engine=args.engine,
                                              **_replica_limits(args))
        hourly = gpu.hourly_usd
    plan = fleet.fleet(args.rate, args.slo_p99_ms / 1e3, replica, arrival_cv2=args.arrival_cv2,
                       service_cv2=args.service_cv2)
    out = asdict(plan)
    if hourly is not None:
        out["usd_per_hour"] = hourly * plan.gpus
        out["usd_per_million_requests"] = cost.usd_per_million_requests(hourly, plan.gpus, plan.rate_rps)
        if plan.tokens_per_s:
            out["usd_per_million_tokens"] = cost.usd_per_million_tokens(hourly, plan.gpus, plan.tokens_per_s)
    emit(args, "Fleet", out)


def _replica_limits(args) -> dict:
    """--max-num-seqs when given; else the replica model's own batch (`fleet.replica_from_roofline`: 256; a
    request waits its batch's whole cycle there, so vLLM's 1024 on a large GPU would overstate its latency)."""
    return {"max_num_seqs": args.max_num_seqs} if hasattr(args, "max_num_seqs") else {}


def cmd_cost(args) -> None:
    if (args.tokens_per_s is None) == (args.model is None):
        raise ValueError("give either --tokens-per-s (measured) or --model with --gpu (predicted)")
    hourly = args.gpu_hourly
    if hourly is None:
        if args.gpu is None:
            raise ValueError("give --gpu-hourly or a --gpu with a catalog price")
        hourly = gpu_from_args(args).hourly_usd
        if hourly is None:
            raise ValueError(f"gpu {args.gpu!r} has no catalog price; give --gpu-hourly")
    tokens_per_s, band = args.tokens_per_s, None
    if args.model is not None:
        if args.gpu is None or args.gpus % args.tp:
            raise ValueError("--model needs --gpu, and --gpus must be a whole multiple of --tp")
        gpu = gpu_from_args(args)
        prompt_tokens, output_tokens = mean_lengths(args)
        replica = fleet.replica_from_roofline(resolve_model(args.model), gpu, dtype=args.dtype,
                                              tp=args.tp, prompt_tokens=prompt_tokens,
                                              output_tokens=output_tokens, profile=profile_from_args(args),
                                              engine=args.engine, **_replica_limits(args))
        tokens_per_s, band = replica.tokens_per_s * (args.gpus // args.tp), replica.error_band
    result = cost.cost(hourly, args.gpus, tokens_per_s, slo_tokens_per_s=args.slo_tokens_per_s,
                       requests_per_s=args.requests_per_s, tokens_per_s_band=band)
    emit(args, "Cost" if band is None else "Cost (predicted throughput)", result)


def _step_model(args) -> StepTimeModel:
    if args.step_base_ms is not None:
        return StepTimeModel(args.step_base_ms / 1e3, args.step_per_seq_ms / 1e3,
                             args.step_per_prefill_token_ms / 1e3, args.step_per_context_token_ms / 1e3)
    if args.model is None or args.gpu is None:
        raise ValueError("give a measured step model (--step-base-ms ...) or --model and --gpu for a roofline one")
    return step_model_from_roofline(resolve_model(args.model), gpu_from_args(args), dtype=args.dtype, tp=args.tp,
                                    profile=profile_from_args(args), engine=args.engine,
                                    layout=MoeLayout.from_args(args))


def _gpu_sizing(args, limits: dict):
    """`calc simulate --model M --gpu G`: the engine's sizing on that GPU (calculators.gpu_engine, the rule
    `servecap serve --emulate` follows); None for a measured step model or a --gpu override of the catalog's."""
    if args.step_base_ms is not None or args.model is None or args.gpu is None:
        return None
    return gpu_engine(resolve_model(args.model), gpu_from_args(args), dtype=args.dtype, tp=args.tp,
                      engine=args.engine or "vllm", engine_version=getattr(args, "engine_version", None),
                      kv_dtype=getattr(args, "kv_dtype", None),
                      max_model_len=args.max_model_len,
                      max_num_seqs=limits.get("max_num_seqs"),
                      max_num_batched_tokens=limits.get("max_num_batched_tokens"), layout=MoeLayout.from_args(args))


def _kv_link(args, sizing):
    """--topology's KV link (`calculators.plan.topology.kv_link_for`); needs the GPU's engine sizing."""
    from calculators.plan.topology import kv_link_for

    if sizing is None:
        raise ValueError("--topology needs --model and --gpu (a GPU's engine sizing and KV bytes)")
    return kv_link_for(gpu_from_args(args), sizing, args.kv_transfer_gbs, args.kv_transfer_latency_us)


def cmd_simulate(args) -> None:
    from calculators.sim.simulate import SimServer, SimWorkload, simulate_levels  # numpy: only here
    from contract.workload import WorkloadSpec
    from engine_core.scheduling.strategies import DEFAULT_STRATEGY
    from engine_core.scheduling.strategies.flags import limit_values

    args.strategy = args.strategy or DEFAULT_STRATEGY
    crossing = args.crossover is not None
    load = check_crossover_flags(args) if crossing else load_from_args(args)
    concurrency, rates = list(load.concurrency) or None, list(load.rates) or None
    limits, kv_blocks, block_size = limit_values(args), args.kv_blocks, args.block_size
    sizing = _gpu_sizing(args, limits)
    if sizing is not None:   # the engine as it would size itself on that GPU; a flag given here wins
        sized = sizing.limit_flags()   # the sequences and step tokens given went into the sizing, a rank's each
        limits = {**sized, **{name: value for name, value in limits.items()
                              if name not in ("max_num_seqs", "max_num_batched_tokens")}}
        kv_blocks = sizing.num_kv_blocks if kv_blocks is None else kv_blocks
        block_size = sizing.block_size if block_size is None else block_size
    server = SimServer.from_flags(args.strategy, num_kv_blocks=kv_blocks, block_size=block_size or 16, **limits)
    levels = concurrency or rates or [1.0]   # --crossover: each level's rate is the search's
    prompt, output = lengths(args)
    arrival_cv2 = 1.0 if concurrency else load.arrival_process(levels[0]).cv2   # --arrival as the simulator's gaps
    workload = SimWorkload(prompt_tokens=prompt, output_tokens=output,
                           requests=args.requests, concurrency=levels[0] if concurrency else None,
                           rate_rps=None if concurrency else levels[0], arrival_cv2=arrival_cv2,
                           seed=WorkloadSpec.from_args(args).seed)
    model = sizing.step_model if sizing is not None and args.efficiency_profile is None else _step_model(args)
    spec = WorkloadSpec.from_args(args)
    if args.topology:
        windowed = replace(workload, warmup_s=load.warmup_s, duration_s=load.duration_s)
        if crossing:
            return crossover_command(args, server, windowed, model, _kv_link(args, sizing), slo_from_args(args))
        return simulate_topologies(args, server, windowed, model, rates, _kv_link(args, sizing), slo_from_args(args))
    if spec.agentic:
        return simulate_sessions_command(args, server, replace(workload, warmup_s=load.warmup_s,
                                                               duration_s=load.duration_s), model, spec, concurrency)
    speculative = _speculative_step(args, "vllm" if sizing is not None else args.engine)
    if speculative is not None and not MoeLayout.from_args(args).plain:
        raise ValueError("--speculative-* with --dp or --expert-parallel: speculative decoding is simulated for "
                         "tensor parallelism alone")
    speculating = None if speculative is None else replace(server, speculative=speculative)   # checked before running
    with level_pool(args.jobs, len(levels) * (1 if speculating is None else 2)) as mapper:
        results = simulate_levels(server, workload, model, concurrencies=concurrency, rates=rates, mapper=mapper)
        side = None
        if speculating is not None:
            side = simulate_levels(speculating, workload, model, concurrencies=concurrency, rates=rates,
                                   mapper=mapper)
    if side is not None:
        answer = simulated_crossover("concurrency" if concurrency else "rate", levels, results, side)
    if args.json:
        extra = {} if side is None else {"speculative": {
            **asdict(speculative), "levels": [r.to_dict() for r in side], "crossover": asdict(answer),
            "statement": answer.statement()}}
        return print_json({"strategy": args.strategy, "step_model": asdict(model),
                           "levels": [r.to_dict() for r in results], **extra})
    rows = [{"offered": next(f"{k}={v}" for k, v in r.offered.items()), "output_tokens_per_s": r.output_tokens_per_s,
             "mean_batch": r.mean_batch_size,
             **{f"{m}_{p}_ms": r.metrics[f"{m}_s"][p] * 1e3 for m in ("ttft", "tpot", "e2e") for p in ("p50", "p99")}}
            for r in results]
    print_rows(f"Simulated {args.strategy} batching", rows, list(rows[0]))
    if side is not None:
        rows = [{"offered": next(f"{k}={v}" for k, v in plain.offered.items()),
                 "tpot_p50_ms": plain.metrics["tpot_s"]["p50"] * 1e3, "spec_tpot_p50_ms": spec.metrics["tpot_s"]["p50"] * 1e3,
                 "output_tokens_per_s": plain.output_tokens_per_s, "spec_output_tokens_per_s": spec.output_tokens_per_s,
                 "spec_ttft_p50_ms": spec.metrics["ttft_s"]["p50"] * 1e3, "spec_mean_batch": spec.mean_batch_size}
                for plain, spec in zip(results, side)]
        print_rows(f"With speculative decoding ({args.speculative_method}, k={speculative.num_tokens}, "
                   f"{speculative.expected_tokens:.2f} tokens per verification) beside without", rows, list(rows[0]))
        print(answer.statement())


def simulated_crossover(axis: str, levels, plain, speculative):
    """The crossover of two simulated curves (`calculators.speculative_crossover`), from their TPOT p50 and tokens/s."""
    from calculators.speculative_crossover import crossover

    def tpot(results):
        return [r.metrics["tpot_s"]["p50"] for r in results]

    return crossover(axis, levels, tpot(plain), tpot(speculative), [r.output_tokens_per_s for r in plain],
                     [r.output_tokens_per_s for r in speculative])


def _speculative_step(args, engine: str | None):
    """--speculative-* as the simulator's SpeculativeStep: a draft's passes timed by its roofline on --gpu."""
    from calculators.sim.speculative_step import SpeculativeStep, draft_step_model

    speculation = speculation_from_args(args)
    if speculation is None:
        return None
    draft = None
    if speculation.draft is not None:
        if args.gpu is None:
            raise ValueError("--speculative-model: the draft's passes are timed by its roofline on --gpu; give --gpu")
        draft = draft_step_model(speculation.draft, gpu_from_args(args), dtype=args.dtype, tp=args.tp,
                                 profile=profile_from_args(args), engine=args.engine or engine)
    return SpeculativeStep(speculation.num_tokens, speculation.acceptance, draft, args.speculative_proposal_share)


def cmd_gpus(args) -> None:
    rows = []
    for name in gpu_names():
        raw = gpu_catalog()[name]
        rows.append({"name": name, "usable_gib": raw["usable_bytes"] and raw["usable_bytes"] / GIB,
                     "bandwidth_gbs": raw["bandwidth_bytes_per_s"] and raw["bandwidth_bytes_per_s"] / 1e9,
                     "tflops_16bit": raw["flops_16bit"] and raw["flops_16bit"] / 1e12,
                     "tflops_fp8": raw["flops_fp8"] and raw["flops_fp8"] / 1e12,
                     "ops_int8_t": raw["ops_int8"] and raw["ops_int8"] / 1e12,
                     "tflops_fp4": raw["flops_fp4"] and raw["flops_fp4"] / 1e12,
                     "interconnect": raw["interconnect"],
                     "interconnect_gbs": raw["interconnect_bytes_per_s"] and raw["interconnect_bytes_per_s"] / 1e9,
                     "hourly_usd": raw["hourly_usd"],
                     "description": raw["description"]})
    if args.json:
        return print_json({"gpus": rows})
    print_rows("GPUs (dense peaks; hourly price is an assumption)", rows, list(rows[0]))


def cmd_models(args) -> None:
    rows = []
    for name in model_names():
        arch = get_model(name)
        w = weights(arch, "bf16")
        rows.append({"name": name, "params_b": w.param_count / 1e9, "layers": arch.num_layers,
                     "heads": arch.num_heads, "kv_heads": arch.num_kv_heads, "head_dim": arch.head_dim,
                     "experts": arch.num_experts, "kv_bytes_per_token_bf16": kv(arch, "bf16").kv_bytes_per_token})
    if args.json:
        return print_json({"models": rows})
    print_rows("Models", rows, list(rows[0]))


COMMANDS = {"kv": cmd_kv, "weights": cmd_weights, "fit": cmd_fit, "roofline": cmd_roofline, "queue": cmd_queue,
            "fleet": cmd_fleet, "cost": cmd_cost, "simulate": cmd_simulate, "calibrate": cmd_calibrate,
            "gpus": cmd_gpus, "models": cmd_models}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        COMMANDS[args.command](args)
    except ValueError as error:
        print(f"servecap calc {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head`: not an error
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
