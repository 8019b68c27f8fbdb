"""Agentic sessions as a plan's demand (`servecap plan --session SPEC` with a rate curve or a day): each
arrival of the curve starts one session (contract.agent_session), and the session becomes a chain of
requests, each sent when the one before it has answered and its wait has passed.

    demand = agent_session_demand(starts, spec, prompt=..., output=..., seed=1, think_time_s=0)

A session's requests, in order, as the load generator sends them (loadgen.scenario.session_loop): per turn,
a user message of `prompt` tokens, then the turn's tool rounds (each a request whose answer is a call of
`spec.call_tokens` tokens, then the tool's latency, a `tool_latency` draw, and a result of `tool_result`
tokens), then the turn's answer of `output` tokens; `think_time_s` passes between an answer and the next
turn. Every request sends the whole history: the agent's system prompt and the tool schemas (the same for
every session: `spec.prefix_tokens`, rounded up to whole blocks of `block_tokens`), then each earlier
request's new content and its answer. The prompt's blocks are listed as prefix ids, the shared prefix's
the same for every session and the history's the session's own, so a returning request finds what its
session's last request left in a replica's cache (calculators.plan.prompt_tokens; the demand file the
fleet replays writes the same ids as Mooncake `hash_ids`). An answer's own tokens are listed as history
ids too: the replay sends the ids' text, not the model's answer, so neither side caches an answer's
positions from its generation.

A turn that fans out runs sub-agents at once and joins their answers: a join waits on several requests,
which one chain of turns cannot say, so a spec with `fanout` is refused (a sweep runs it:
`servecap sweep --session`).

Pure: draws only (seeded per session, so adding sessions leaves the earlier ones as they were).
"""

from __future__ import annotations

import random
from dataclasses import replace

from calculators.plan.demand import SESSION_BLOCK_TOKENS, Demand, from_rows
from contract.agent_session import SessionSpec
from contract.distributions import LengthDistribution

SHARED_PREFIX_IDS = 1 << 40   # the system prompt's and schemas' block ids count up from here; a session's own
SESSION_ID_SPAN = 1 << 24     # history ids from session k * SESSION_ID_SPAN (ample for any session's blocks)


def check_plannable(spec: SessionSpec) -> None:
    """ValueError in one line when the session cannot be a chain of turns (a fan-out's join)."""
    if spec.fanout[1]:
        raise ValueError("--session fanout: sub-agents run at once and their answers join, which a plan's chain "
                         "of turns cannot say; plan the session without it, or run it with `servecap sweep "
                         "--session`")


def agent_session_demand(starts: Demand, spec: SessionSpec, *, prompt: LengthDistribution, output: LengthDistribution,
                         seed: int, think_time_s: float = 0.0, block_tokens: int = SESSION_BLOCK_TOKENS) -> Demand:
    """One session (module doc) from each of `starts`' send times; `starts`' own lengths are not used."""
    check_plannable(spec)
    if not think_time_s >= 0:
        raise ValueError(f"--think-time must be >= 0, got {think_time_s!r}")
    shared_blocks = -(-spec.prefix_tokens // block_tokens)
    shared = tuple(range(SHARED_PREFIX_IDS, SHARED_PREFIX_IDS + shared_blocks))
    shared_tokens = shared_blocks * block_tokens
    offsets, prompts, outputs, prefixes, keys, delays = [], [], [], [], [], []
    for number, start in enumerate(starts.t_s.tolist()):
        rng = random.Random(f"{seed}/session/{number}")
        base, history, wait = number * SESSION_ID_SPAN, 0, None
        for turn in range(spec.turns):
            plan = spec.draw_turn(rng)
            new = prompt.sample(rng)   # the user's message
            if turn:
                wait = think_time_s
            for step in range(plan.tool_rounds + 1):
                history += new
                answer = spec.call_tokens if step < plan.tool_rounds else output.sample(rng)
                offsets.append(start)
                prompts.append(shared_tokens + history)
                outputs.append(answer)
                prefixes.append(shared + tuple(range(base, base + -(-history // block_tokens))))
                keys.append(number)
                delays.append(wait)
                history += answer
                if step < plan.tool_rounds:
                    wait = spec.tool_latency.sample(rng)
                    new = spec.tool_result.sample(rng)
    demand = from_rows(offsets, prompts, outputs, prefixes, session=keys, delay_s=delays,
                       duration_s=None, prefix_block_tokens=block_tokens)
    source = (f"{len(starts)} agent sessions ({spec.spec or 'the default spec'}) started by "
              f"{starts.source or 'arrivals'}; {len(demand)} requests")
    return replace(demand, source=source, duration_s=starts.duration_s)
