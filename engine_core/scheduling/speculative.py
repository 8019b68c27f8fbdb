"""Speculative decoding's pure parts: who proposes, and how many proposals are kept. Ints and floats only.

    NgramProposer(k, max_n, min_n).propose(token_ids) -> up to k proposed next tokens
    DraftSlots(k).propose(token_ids) -> k places for a draft model's tokens (the runner fills them)
    accept_greedy(proposals, target) -> the tokens a verification step keeps
    per_position_acceptance(rates, k) -> the acceptance at each position, as vLLM reports it
    parse_acceptance("0.7" | "0.8,0.6") -> the rates as a flag gives them
    AcceptanceDraws(rates, seed).accepted(k) -> how many of k proposals a seeded draw keeps

Prompt lookup (vLLM's `ngram` method): take the sequence's last n tokens (n from max_n down to
min_n), find their latest earlier occurrence in the sequence, and propose the up to k tokens that
followed it. Nothing found: no proposal, and the sequence decodes one token as without speculation.

Verification: the target ran one pass over the sequence's last token and its proposals d_1..d_k,
giving its own greedy token t_0..t_k after each (t_i follows d_i; t_0 follows the last token).
It keeps d_1..d_j while each d_i equals t_{i-1}, then its own t_j: j + 1 tokens, exactly what
greedy decoding without speculation would have produced one step at a time.

Acceptance per position is vLLM's: of the drafts, the share whose i-th proposal was kept
(`spec_decode_num_accepted_tokens_per_pos` / `spec_decode_num_drafts`). A position is kept only if
every one before it was, so the rates never rise with the position. One rate a stands for the same
chance at every position given the ones before it were kept: a, a^2, ..., a^k. A verification step
then yields 1 + the sum of the rates tokens per sequence on average.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
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


class DraftSlots:
    """A draft model's proposals: k places for every sequence (fewer where max_tokens leaves less), here
    the sequence's last token repeated. The tokens are the draft's business (the model runner runs it
    and writes them in before the target's pass) or, with emulated acceptance, nobody's: the draws decide.
    `share` < 1 (the simulator's, for prompt lookup): a decode proposes with that chance, by seeded
    draws, as prompt lookup proposes only where the sequence's last tokens recur."""

    def __init__(self, num_tokens: int, share: float = 1.0, seed: int = 0) -> None:
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
            raise ValueError(f"num_tokens must be a positive integer, got {num_tokens!r}")
        check_share(share)
        self.num_tokens, self.share = num_tokens, float(share)
        self._rng = random.Random(f"proposal-share/{seed}")

    def propose(self, token_ids: list[int], limit: int | None = None) -> list[int]:
        k = self.num_tokens if limit is None else min(self.num_tokens, limit)
        if k <= 0 or not token_ids or (self.share < 1.0 and self._rng.random() >= self.share):
            return []
        return [token_ids[-1]] * k


def check_share(share: float) -> None:
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ValueError(f"the share of decodes that propose must lie in (0, 1], got {share!r}")


def per_position_acceptance(rates: Sequence[float], num_tokens: int) -> tuple[float, ...]:
    """The acceptance at each of `num_tokens` positions, from one rate a (a^i at position i) or one per
    position as vLLM reports them (never rising: a later position is kept only after the earlier ones)."""
    rates = tuple(rates)
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
        raise ValueError(f"num speculative tokens must be a positive integer, got {num_tokens!r}")
    if any(isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a <= 1 for a in rates):
        raise ValueError(f"speculative acceptance rates must lie in [0, 1], got {list(rates)}")
    if len(rates) == 1:
        return tuple(float(rates[0]) ** i for i in range(1, num_tokens + 1))
    if len(rates) != num_tokens:
        raise ValueError(f"speculative acceptance: give one rate or one per position ({num_tokens}), "
                         f"got {len(rates)}")
    if any(later > earlier for earlier, later in zip(rates, rates[1:])):
        raise ValueError(f"speculative acceptance per position cannot rise (a position is kept only after the "
                         f"ones before it), got {list(rates)}")
    return tuple(float(a) for a in rates)


def parse_acceptance(text: str, flag: str = "--speculative-acceptance") -> tuple[float, ...]:
    """A flag's one rate or comma-separated rates; ValueError naming the flag (checked further by
    `per_position_acceptance`)."""
    try:
        return tuple(float(part) for part in str(text).split(","))
    except ValueError:
        raise ValueError(f"{flag}: {text!r} is not a rate or a comma-separated list of rates") from None


class AcceptanceDraws:
    """Emulated acceptance: how many of a sequence's proposals are kept, by seeded draws that give each
    position its rate (`per_position_acceptance`): position i is tried only when i - 1 was kept, with
    chance rate_i / rate_(i-1)."""

    def __init__(self, rates: Sequence[float], seed: int = 0) -> None:
        self.rates = tuple(rates)
        previous = (1.0,) + self.rates[:-1]
        self._given_previous = tuple(0.0 if before == 0 else rate / before
                                     for rate, before in zip(self.rates, previous))
        self._rng = random.Random(f"speculative-acceptance/{seed}")

    def accepted(self, proposed: int) -> int:
        kept = 0
        for chance in self._given_previous[:proposed]:
            if self._rng.random() >= chance:
                break
            kept += 1
        return kept
