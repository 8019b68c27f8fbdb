"""Per-request sampling parameters (plain data, validated)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each output token and when to stop.

    Attributes:
        max_tokens: most output tokens (finish_reason "length" when reached).
        temperature: 0 = greedy (argmax); higher flattens the distribution.
        top_p: nucleus sampling: keep the smallest set of tokens whose probability reaches top_p.
        seed: per-request seed: the same request gives the same tokens whatever it is batched with.
        ignore_eos: keep generating past the end-of-sequence token (fixes the output length).
        min_tokens: end-of-sequence and stop tokens are suppressed until this many were produced.
        stop_token_ids: extra ids that end the sequence (finish_reason "stop"), kept in the output.
        kv_transfer: disaggregated prefill and decode (vLLM's `kv_transfer_params`): "send" = prefill here
            for a decode worker (`do_remote_decode`), "receive" = the prompt's KV comes from a prefill
            worker (`do_remote_prefill`); None = neither.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    kv_transfer: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not 0 <= self.seed < 2**63):
            raise ValueError(f"seed must be a non-negative integer or None, got {self.seed!r}")
        if not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos must be a boolean, got {self.ignore_eos!r}")
        if isinstance(self.min_tokens, bool) or not isinstance(self.min_tokens, int) or self.min_tokens < 0:
            raise ValueError(f"min_tokens must be a non-negative integer, got {self.min_tokens!r}")
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must not exceed max_tokens ({self.max_tokens})")
        stops = tuple(self.stop_token_ids)
        for token_id in stops:
            if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
                raise ValueError(f"stop_token_ids must be non-negative integers, got {token_id!r}")
        object.__setattr__(self, "stop_token_ids", stops)
        if self.kv_transfer not in (None, "send", "receive"):
            raise ValueError(f"kv_transfer must be 'send', 'receive' or None, got {self.kv_transfer!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
