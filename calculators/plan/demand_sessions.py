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

A turn that fans out (`fanout`) runs its first tool round as sub-agents, as the load generator does: after
the round's call, its sub-agents are sent at once, each one request of its own (the system prompt and the
tools, then a task of `prompt` tokens with its own blocks; an answer of `tool_result` tokens), and the
turn's next request goes when the last of them has answered (`Demand.joins`), their answers its new
content (the fleet's demand file marks them a `parallel` group, which its replay sends at once).

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
SUBAGENT_IDS = 1 << 42        # a sub-agent's own task blocks: SUBAGENT_IDS + its number * SUBAGENT_ID_SPAN on
SUBAGENT_ID_SPAN = 1 << 20


def agent_session_demand(starts: Demand, spec: SessionSpec, *, prompt: LengthDistribution, output: LengthDistribution,
                         seed: int, think_time_s: float = 0.0, block_tokens: int = SESSION_BLOCK_TOKENS) -> Demand:
    """One session (module doc) from each of `starts`' send times; `starts`' own lengths are not used."""
    if not think_time_s >= 0:
        raise ValueError(f"--think-time must be >= 0, got {think_time_s!r}")
    shared_blocks = -(-spec.prefix_tokens // block_tokens)
    shared = tuple(range(SHARED_PREFIX_IDS, SHARED_PREFIX_IDS + shared_blocks))
    shared_tokens = shared_blocks * block_tokens
    offsets, prompts, outputs, prefixes, keys, delays, parents, joins = [], [], [], [], [], [], [], []

    def row(start: float, tokens: int, answer: int, ids: tuple, number: int, wait, parent) -> int:
        offsets.append(start)
        prompts.append(tokens)
        outputs.append(answer)
        prefixes.append(ids)
        keys.append(number)
        delays.append(wait)
        parents.append(parent)
        return len(offsets) - 1

    subagents = 0
    for number, start in enumerate(starts.t_s.tolist()):
        rng = random.Random(f"{seed}/session/{number}")
        base, history, wait, last, joined = number * SESSION_ID_SPAN, 0, None, None, ()
        for turn in range(spec.turns):
            plan = spec.draw_turn(rng)
            new = prompt.sample(rng)   # the user's message
            if turn:
                wait = think_time_s
            for step in range(plan.tool_rounds + 1):
                history += new
                answer = spec.call_tokens if step < plan.tool_rounds else output.sample(rng)
                last = row(start, shared_tokens + history, answer,
                           shared + tuple(range(base, base + -(-history // block_tokens))), number, wait, last)
                joins.extend((last, other) for other in joined)
                joined = ()
                history += answer
                if step == 0 and plan.fanout:   # the round's sub-agents, at once at its answer; then the join
                    subs = []
                    for _ in range(plan.fanout):
                        task, result = prompt.sample(rng), spec.tool_result.sample(rng)
                        own = SUBAGENT_IDS + subagents * SUBAGENT_ID_SPAN
                        subagents += 1
                        subs.append(row(start, shared_tokens + task, result,
                                        shared + tuple(range(own, own + -(-task // block_tokens))), number, 0.0,
                                        last))
                    last, joined = subs[-1], tuple(subs[:-1])
                    wait, new = 0.0, sum(outputs[k] for k in subs)
                elif step < plan.tool_rounds:
                    wait = spec.tool_latency.sample(rng)
                    new = spec.tool_result.sample(rng)
    demand = from_rows(offsets, prompts, outputs, prefixes, session=keys, delay_s=delays, duration_s=None,
                       prefix_block_tokens=block_tokens, parents=parents, joins=joins)
    source = (f"{len(starts)} agent sessions ({spec.spec or 'the default spec'}) started by "
              f"{starts.source or 'arrivals'}; {len(demand)} requests")
    return replace(demand, source=source, duration_s=starts.duration_s)
