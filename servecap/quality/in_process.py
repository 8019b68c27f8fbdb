"""Quality in-process: two reference engines built from server flags, the same seeded prompts, compared.

    engine_from_args(server_args, model) -> Engine          the flags `servecap serve` takes
    compare_engines(a, b, prompts, max_tokens, seed, text) -> QualityResult's dict

A's greedy output on each prompt is the reference. B is scored on it teacher-forced (`engine.scoring`):
at every position both see the same context, so the KL of their next-token distributions and B's top-1
agreement measure the models, not an early divergence's knock-on. Each engine also generates its own
greedy output (through its scheduler and runner, as served), for the prefix agreement a user sees.
"""

from __future__ import annotations

import shlex

import numpy as np

from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams
from reports.quality.measures import kl_divergence, perplexity, prefix_agreement, summarize

PERPLEXITY_WINDOW = 256   # tokens per held-out chunk (less where the model's context is shorter)


def engine_from_args(server_args: str, model: str) -> Engine:
    """An engine from `servecap serve` flags; ValueError names a bad flag or one an emulated GPU cannot run."""
    from reference_server.cli import build_parser, configs_from_args

    parser = build_parser()
    try:
        args = parser.parse_args(["--model", model, *shlex.split(server_args)])
    except SystemExit:
        raise ValueError(f"server flags {server_args!r} are not `servecap serve` flags") from None
    config, _, _ = configs_from_args(args)
    if config.emulated:
        raise ValueError("quality compares outputs: an emulated GPU (--emulate) runs no model and has none")
    return Engine(config)


def greedy_outputs(engine: Engine, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
    """Every prompt's greedy output of exactly `max_tokens` tokens (end of sequence ignored), batched as served."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    for i, ids in enumerate(prompts):
        engine.add_request(f"quality-{i}", ids, params)
    outputs: dict[str, list[int]] = {f"quality-{i}": [] for i in range(len(prompts))}
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id].extend(out.new_token_ids)
    return [outputs[f"quality-{i}"] for i in range(len(prompts))]


def _teacher_forced(engine: Engine, prompt: list[int], output: list[int]) -> np.ndarray:
    from reference_server.engine.scoring import sequence_log_probs

    logp = sequence_log_probs(engine.runner, prompt + output)
    return logp[len(prompt) - 1: len(prompt) + len(output) - 1].numpy()   # the rows that predict the output


def text_chunks(text_ids: list[int], window: int, bos_id: int) -> list[list[int]]:
    """Held-out text as chunks of `window` tokens, each after a BOS (the last may be shorter, but not empty)."""
    step = window - 1
    return [[bos_id, *text_ids[i:i + step]] for i in range(0, len(text_ids), step) if text_ids[i:i + step]]


def _nll(engine: Engine, chunk: list[int]) -> float:
    from reference_server.engine.scoring import sequence_log_probs

    logp = sequence_log_probs(engine.runner, chunk)[:-1].numpy()
    return float(-logp[np.arange(len(chunk) - 1), chunk[1:]].sum())


def compare_engines(a: Engine, b: Engine, prompts: list[list[int]], max_tokens: int, *, seed: int = 0,
                    text: str | None = None, progress=None) -> dict:
    """The quality of B against A (`summarize`d over prompts), and per prompt."""
    for name, engine in (("a", a), ("b", b)):
        if engine.has_unfinished_requests():
            raise ValueError(f"engine {name} is busy: quality needs idle engines")
    out_a = greedy_outputs(a, prompts, max_tokens)
    out_b = greedy_outputs(b, prompts, max_tokens)
    per_prompt = []
    for i, (prompt, ta, tb) in enumerate(zip(prompts, out_a, out_b)):
        logp_a, logp_b = _teacher_forced(a, prompt, ta), _teacher_forced(b, prompt, ta)
        per_prompt.append({
            "prompt_tokens": len(prompt), "prefix_agreement": prefix_agreement(ta, tb),
            "top1_agreement": float(np.mean(logp_b.argmax(axis=-1) == np.asarray(ta))),
            "kl_mean": float(kl_divergence(logp_a, logp_b).mean()), "identical": ta == tb})
        if progress is not None:
            progress(i + 1, len(prompts))
    measures = {name: summarize([p[name] for p in per_prompt], seed)
                for name in ("prefix_agreement", "top1_agreement", "kl_mean")}
    measures["identical_outputs"] = sum(p["identical"] for p in per_prompt) / len(per_prompt)
    if text is not None:
        window = min(PERPLEXITY_WINDOW, a.max_model_len, b.max_model_len)
        chunks = text_chunks(a.tokenizer.encode(text), window, a.tokenizer.bos_id)
        if not chunks:
            raise ValueError("the held-out text is empty")
        counts = [len(chunk) - 1 for chunk in chunks]
        for name, engine in (("a", a), ("b", b)):
            measures[f"perplexity_{name}"] = perplexity([_nll(engine, chunk) for chunk in chunks], counts, seed)
    return {"measures": measures, "per_prompt": per_prompt}
