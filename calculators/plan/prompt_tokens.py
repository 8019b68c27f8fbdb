"""The token ids a simulated replica sees for a request of the demand: its prefix blocks' shared tokens,
then tokens of its own, so that requests sharing a prefix share KV blocks in a replica's prefix cache
(and a hedge's copy, the same prompt, finds its primary's blocks where they are). Pure."""

from __future__ import annotations

from calculators.plan.demand import Demand

PREFIX_TOKEN_BASE = 1 << 40   # prefix block tokens live above every request index (unique-prompt tokens)


def prompt_tokens(demand: Demand, i: int) -> list[int]:
    """Request i's prompt: its prefix blocks' shared tokens, then tokens of its own (distinct per request)."""
    prompt = int(demand.prompt[i])
    prefix = demand.prefix[i] if demand.prefix is not None else ()
    if not prefix:
        return [i] * prompt
    size = demand.prefix_block_tokens
    tokens: list[int] = []
    for block in prefix:
        tokens.extend([PREFIX_TOKEN_BASE + block] * size)
        if len(tokens) >= prompt:
            return tokens[:prompt]
    return tokens + [i] * (prompt - len(tokens))
