"""`servecap quality`: a configuration's outputs against a reference configuration's, on seeded prompts.

    servecap quality --model small --a-args "" --b-args "--quantization int8" --out quality.json
    servecap quality --a-url http://127.0.0.1:8000 --b-url http://127.0.0.1:8001 --logprobs 5

In-process (--a-args/--b-args, `servecap serve` flags) it reports, over the prompts with 95% intervals:
the prefix agreement of the two greedy outputs (the share of positions before the first divergence),
B's top-1 agreement with A's greedy tokens teacher-forced, the mean KL(A || B) of next-token
distributions, and with --text FILE each side's perplexity on that held-out text. Against endpoints it
reports the prefix and positional agreement, and a top-K KL estimate where both give logprobs.

Write the result into a run directory (`--out RUN/quality.json`) and `servecap report RUN` shows it
beside the sweep. Exit codes: 0 measured, 1 an endpoint failed, 2 bad flags.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from contract.distributions import LengthDistribution
from contract.options import CommandParser, add_options, add_output_arguments
from contract.workload import WorkloadSpec, add_workload_arguments
from engine_core.options import EngineOptions
from loadgen.workload.prompts import ascii_text


def _parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="servecap quality", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for arm, role in (("a", "the reference"), ("b", "the configuration measured against it")):
        group = p.add_argument_group(f"arm {arm.upper()}: {role} (exactly one)")
        group.add_argument(f"--{arm}-args", help='reference-server flags, in-process, e.g. "--quantization int8"')
        group.add_argument(f"--{arm}-url", help="an OpenAI-compatible endpoint already running")
        group.add_argument(f"--{arm}-model", help="the model name to ask the endpoint for (default: its first)")
    add_options(p, EngineOptions, title="the in-process engines (--a-args, --b-args)", only=("model",), typed=True)
    p.set_defaults(model="tiny")
    p.add_argument("--prompts", type=int, default=32, help="seeded prompts (default 32)")
    add_workload_arguments(p, title="prompts (tokens: bytes; the seed also draws the bootstrap)",
                           only=("prompt-tokens", "seed"))
    p.add_argument("--max-tokens", type=int, default=64, help="greedy output tokens per prompt (default 64)")
    p.add_argument("--text", help="held-out text file: each in-process side's perplexity on it")
    p.add_argument("--prompt-text", help="take the prompts as seeded windows of this file (default: pseudo-words)")
    p.add_argument("--logprobs", type=int, help="endpoints: ask for the top K log-probabilities (a KL estimate)")
    add_output_arguments(p, out="write the result as JSON here (RUN/quality.json: the report shows it)",
                         metavar="FILE", report=False)
    return p


def seeded_prompts(count: int, tokens: int | LengthDistribution, seed: int, source: str | None = None) -> list[str]:
    """`count` prompts of `tokens` bytes each (a number, or lengths drawn from a distribution): seeded
    pseudo-words, or seeded windows of `source` (text the model knows the kind of, e.g. held-out text for
    a trained model), each cut at a line start. A fixed length gives the same prompts whatever draws
    another would make (each prompt's length is drawn apart from its text)."""
    lengths = LengthDistribution.fixed(tokens) if isinstance(tokens, int) else tokens
    sizes = [lengths.sample(random.Random(f"quality/{seed}/{i}/length")) for i in range(count)]
    if source is None:
        return [ascii_text(size, random.Random(f"quality/{seed}/{i}")) for i, size in enumerate(sizes)]
    data = source.encode("utf-8", errors="replace")
    if len(data) < 2 * max(sizes, default=0):
        raise ValueError(f"--prompt-text holds {len(data)} bytes: too few for prompts of {max(sizes)}")
    prompts = []
    for i, size in enumerate(sizes):
        start = random.Random(f"quality/{seed}/{i}").randrange(0, len(data) - 2 * size)
        start = data.find(b"\n", start, start + size) + 1 or start
        prompts.append(data[start:start + size].decode("utf-8", errors="ignore"))
    return prompts


def _check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """'in-process' or 'endpoints'; parser.error (exit 2) names a bad combination."""
    for name in ("prompts", "max_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    try:
        args.workload = WorkloadSpec.from_args(args)   # --prompt-tokens and --seed, as every command reads them
    except ValueError as exc:
        parser.error(str(exc))
    for flag, path in (("--text", args.text), ("--prompt-text", args.prompt_text)):
        if path is not None and not Path(path).is_file():
            parser.error(f"{flag} {path}: no such file")
    if args.logprobs is not None and args.logprobs < 1:
        parser.error(f"--logprobs must be at least 1, got {args.logprobs}")
    modes = []
    for arm in ("a", "b"):
        given = [kind for kind in ("args", "url") if getattr(args, f"{arm}_{kind}") is not None]
        if len(given) != 1:
            parser.error(f"arm {arm.upper()}: give exactly one of --{arm}-args and --{arm}-url")
        modes.append(given[0])
    if modes[0] != modes[1]:
        parser.error("give both arms as --a-args/--b-args (in-process) or both as --a-url/--b-url")
    if modes[0] == "args" and args.logprobs is not None:
        parser.error("--logprobs is for endpoints: in-process, the full distributions are compared")
    if modes[0] == "url" and args.text is not None:
        parser.error("--text (perplexity) needs the models in-process: give --a-args/--b-args")
    return "in-process" if modes[0] == "args" else "endpoints"


def _read(path: str | None, flag: str) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"{flag} {path}: {exc.strerror}") from None


def _served_model(url: str) -> str:
    import requests

    try:
        models = requests.get(url.rstrip("/") + "/v1/models", timeout=30).json()["data"]
        return models[0]["id"]
    except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
        raise ValueError(f"{url}/v1/models: cannot tell the served model ({exc}); give --a-model/--b-model") from None


def _table(result: dict) -> list[str]:
    lines = [f"quality of B against A ({result['mode']}, {result['prompts']} prompts, {result['max_tokens']} "
             f"greedy tokens each)"]
    for name, value in result["measures"].items():
        if isinstance(value, dict):
            if value["mean"] is None:
                lines.append(f"  {name:22s} not measured")
                continue
            low, high = value["ci95"]
            lines.append(f"  {name:22s} {value['mean']:.4g}  (95% CI {low:.4g}-{high:.4g}, n={value['n']})")
        else:
            lines.append(f"  {name:22s} {value:.4g}")
    return lines


def run(args: argparse.Namespace, mode: str, console: Console) -> dict:
    workload = args.workload
    prompts = seeded_prompts(args.prompts, workload.prompt_lengths, workload.seed,
                             _read(args.prompt_text, "--prompt-text"))
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("comparing outputs", total=args.prompts)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done)

        if mode == "in-process":
            from servecap.quality.in_process import compare_engines, engine_from_args

            text = _read(args.text, "--text")
            a, b = engine_from_args(args.a_args, args.model), engine_from_args(args.b_args, args.model)
            ids = [a.tokenizer.encode(p, add_bos=True) for p in prompts]
            result = compare_engines(a, b, ids, args.max_tokens, seed=workload.seed, text=text, progress=progress)
            sides = {"a": {"server_args": args.a_args, "engine": _engine_summary(a)},
                     "b": {"server_args": args.b_args, "engine": _engine_summary(b)}}
        else:
            from servecap.quality.endpoints import Endpoint, compare_endpoints

            a = Endpoint(args.a_url, args.a_model or _served_model(args.a_url))
            b = Endpoint(args.b_url, args.b_model or _served_model(args.b_url))
            result = compare_endpoints(a, b, prompts, args.max_tokens, logprobs=args.logprobs, seed=workload.seed,
                                       progress=progress)
            sides = {"a": {"url": a.url, "model": a.model}, "b": {"url": b.url, "model": b.model}}
    return {"kind": "servecap-quality", "mode": mode, **sides, "prompts": args.prompts,
            "prompt_text": args.prompt_text,
            "prompt_tokens": workload.prompt_tokens, "max_tokens": args.max_tokens, "seed": workload.seed,
            "text": args.text, **result}


def _engine_summary(engine) -> dict:
    described = engine.describe()
    return {key: described[key] for key in ("model", "dtype", "device", "quantization", "weight_bytes")}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    mode = _check(args, parser)
    console = Console(stderr=True)
    try:
        result = run(args, mode, console)
    except ValueError as exc:
        if mode == "in-process":
            parser.error(str(exc))
        print(f"servecap quality: {exc}", file=sys.stderr)
        return 1
    for line in _table(result):
        print(line)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
