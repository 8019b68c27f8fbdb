"""``servecap calc simulate --session``: each level's agentic sessions (calculators.sim.sessions), by turn and whole."""

from __future__ import annotations

from dataclasses import asdict, replace
from functools import partial

from calculators.cli.level_pool import level_pool
from calculators.cli.output import print_json, print_rows


def simulate_sessions_command(args, server, workload, model, spec, concurrency) -> None:
    """`workload` carries the load test's window; `spec` the workload options (its session spec, think time)."""
    from calculators.sim.sessions import simulate_sessions   # numpy: only here

    if not concurrency:
        raise ValueError("--session: sessions run closed loop: give --concurrency (sessions at once)")
    if args.speculative_method:
        raise ValueError("--session simulates without speculative decoding: leave out --speculative-method")
    run = partial(simulate_sessions, server, step_model=model, spec=spec.session_spec, think_s=spec.think_time_s,
                  answers_cached=args.answers_read_back == "yes")
    with level_pool(args.jobs, len(concurrency)) as mapper:
        levels = list(mapper(run, [replace(workload, concurrency=c) for c in concurrency]))
    if args.json:
        return print_json({"strategy": args.strategy, "step_model": asdict(model), "session": spec.session,
                           "levels": [level.to_dict() for level in levels]})
    rows = [{"sessions at once": c, "completed": p.sessions_completed,
             "completion_p50_s": p.completion_p50_s, "completion_p99_s": p.completion_p99_s,
             "requests": p.result.requests, "tool_rounds": p.tool_rounds,
             "output_tokens_per_s": p.result.output_tokens_per_s}
            for c, p in zip(concurrency, levels)]
    print_rows(f"Simulated {args.strategy} batching, sessions {spec.session}", rows, list(rows[0]))
    rows = [{"sessions at once": c, "turn": turn, "requests": t.requests, "prompt_tokens_mean": t.prompt_tokens_mean,
             "prefix_cache_share": t.cached_share, "ttft_p50_ms": _ms(t.ttft_p50_s), "ttft_p99_ms": _ms(t.ttft_p99_s)}
            for c, p in zip(concurrency, levels) for turn, t in p.by_turn.items()]
    print_rows("By turn (the main agent's requests)", rows, list(rows[0]))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3
