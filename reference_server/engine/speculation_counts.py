"""Speculative decoding as the engine reports it: vLLM's spec-decode counters, and the /v1/engine block.

`SpeculationCounts.count(batch, tokens)` after each step adds its verifications (drafts, draft tokens,
accepted tokens, accepted per position) and returns the step's accepted tokens; `describe_speculation`
says which method, k and acceptance mode run. Pure: no tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference_server.engine.config import EngineConfig
from engine_core.scheduling.strategies.base import ScheduledBatch


@dataclass
class SpeculationCounts:
    """vLLM's spec-decode counters since the last reset: verifications, proposals verified, proposals kept,
    and proposals kept at position 1, 2, ..., k."""

    k: int
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.drafts = self.draft_tokens = self.accepted_tokens = 0
        self.accepted_per_position = [0] * self.k

    def count(self, batch: ScheduledBatch, tokens: list) -> int:
        """Add a step's verifications (a sequence's kept tokens come as a list); the step's accepted tokens."""
        step_accepted = 0
        for seq, kept in zip(batch.seqs, tokens):
            if not isinstance(kept, list):
                continue
            accepted = len(kept) - 1
            self.drafts += 1
            self.draft_tokens += len(seq.spec_token_ids)
            self.accepted_tokens += accepted
            step_accepted += accepted
            for position in range(accepted):
                self.accepted_per_position[position] += 1
        return step_accepted


def describe_speculation(cfg: EngineConfig, draft_kv_cache_bytes: int | None, emulated: bool) -> dict | None:
    """The /v1/engine `speculative` block: the method, k, and which acceptance mode runs (None: no speculation)."""
    if cfg.speculative_method is None:
        return None
    mode = cfg.speculation_mode
    described = {"method": cfg.speculative_method, "num_speculative_tokens": cfg.num_speculative_tokens,
                 "mode": mode, "speculative_model": cfg.speculative_model}
    if draft_kv_cache_bytes is not None:
        described["draft_kv_cache_bytes"] = draft_kv_cache_bytes
    if cfg.speculative_method == "ngram":
        described.update(prompt_lookup_max=cfg.prompt_lookup_max, prompt_lookup_min=cfg.prompt_lookup_min)
    if mode == "exact":
        described["acceptance"] = ("exact: the target verifies every proposal (greedy: its argmax agrees; "
                                   "sampled: rejection sampling)")
    else:
        described["acceptance_per_position"] = list(cfg.speculative_acceptance)
        described["acceptance"] = ("emulated: seeded draws keep proposals at these per-position rates"
                                   + ("; the step model times the verification and the draft's passes"
                                      if emulated else "; the proposals and the verification "
                                      "pass run as in the exact mode"))
    return described
