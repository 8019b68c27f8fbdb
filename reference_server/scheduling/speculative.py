"""Speculative decoding's pure parts: the ngram proposer and the greedy acceptance rule. Ints only.

    NgramProposer(k, max_n, min_n).propose(token_ids) -> up to k proposed next tokens
    accept_greedy(proposals, target) -> the tokens a verification step keeps

Prompt lookup (vLLM's `ngram` method): take the sequence's last n tokens (n from max_n down to
min_n), find their latest earlier occurrence in the sequence, and propose the up to k tokens that
followed it. Nothing found: no proposal, and the sequence decodes one token as without speculation.

Verification: the target ran one pass over the sequence's last token and its proposals d_1..d_k,
giving its own greedy token t_0..t_k after each (t_i follows d_i; t_0 follows the last token).
It keeps d_1..d_j while each d_i equals t_{i-1}, then its own t_j: j + 1 tokens, exactly what
greedy decoding without speculation would have produced one step at a time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NgramProposer:
    num_tokens: int          # k
    max_n: int = 4           # vLLM's prompt_lookup_max
    min_n: int = 1           # vLLM's prompt_lookup_min

    def __post_init__(self) -> None:
        for name in ("num_tokens", "max_n", "min_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.min_n > self.max_n:
            raise ValueError(f"min_n ({self.min_n}) must not exceed max_n ({self.max_n})")

    def propose(self, token_ids: list[int], limit: int | None = None) -> list[int]:
        """Up to min(k, `limit`) tokens that followed the latest earlier occurrence of the longest suffix."""
        k = self.num_tokens if limit is None else min(self.num_tokens, limit)
        total = len(token_ids)
        if k <= 0 or total < 2:
            return []
        for n in range(min(self.max_n, total - 1), self.min_n - 1, -1):
            suffix = token_ids[total - n:]
            first = suffix[0]
            for start in range(total - n - 1, -1, -1):   # latest occurrence first, not the suffix itself
                if token_ids[start] == first and token_ids[start:start + n] == suffix:
                    return token_ids[start + n:start + n + k]
        return []


def accept_greedy(proposals: list[int], target: list[int]) -> list[int]:
    """The kept tokens: proposals while they equal the target's own, then the target's next one.
    `target` has len(proposals) + 1 tokens (the target's greedy token after each fed position)."""
    if len(target) != len(proposals) + 1:
        raise ValueError(f"target needs {len(proposals) + 1} tokens for {len(proposals)} proposals, got {len(target)}")
    kept = []
    for proposed, own in zip(proposals, target):
        if proposed != own:
            break
        kept.append(proposed)
    kept.append(target[len(kept)])
    return kept
