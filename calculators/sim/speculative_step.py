"""What speculative decoding adds to a step's time, and the sequences' proposals kept, for a step model.

    extra_s = target.per_prefill_token_s x proposal tokens                      (the verification)
            + draft.step_s(sequences, prefill tokens, context)                  (the draft's first pass,
              + (k - 1) x draft.step_s(proposing sequences, 0, context)          then one per proposal)

A verification feeds each decoding sequence its last token and its proposals in one pass: the
weights are read once, so the extra tokens cost what prompt tokens cost, their compute. A draft
model (method "draft") runs beside the target: one pass over the step's tokens (it keeps its own
KV cache of every prompt and the newest tokens) that gives the first proposal, then one decode
pass for each further one. Prompt lookup ("ngram") runs on the host, off the GPU's clock: no draft.

The emulated GPU's runner and the simulator both time a step with this, so a capacity study on an
emulated replica and its prediction count the same work.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.options import option, parse_float
from engine_core.architecture import ModelArchitecture
from calculators.efficiency_profile import EfficiencyProfile
from engine_core.gpus import GpuSpec
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline
from engine_core.scheduling.batch_shape import BatchShape
from engine_core.scheduling.speculative import AcceptanceDraws, DraftSlots, check_share, per_position_acceptance


def draft_step_model(draft: ModelArchitecture, gpu: GpuSpec, *, dtype: str, tp: int = 1, engine: str | None = "vllm",
                     profile: EfficiencyProfile | None = None) -> StepTimeModel:
    """A draft model's step time on the target's GPU: its roofline under the target's efficiency profile and
    engine factors (one rule for the emulated replica, `calc simulate` and `predict --gpu`). The draft's
    weights and KV cache are not taken out of the target's memory."""
    return step_model_from_roofline(draft, gpu, dtype=dtype, tp=tp, profile=profile, engine=engine)


@dataclass(frozen=True)
class ProposalShareOption:
    """`--speculative-proposal-share`, once for every simulated speculation (`calc simulate`, `predict`)."""

    speculative_proposal_share: float = option(
        1.0, parse=parse_float, metavar="S",
        help="the share of decodes that propose (default 1; prompt lookup's is what a server counted: the "
             "report's spec_drafts_per_decode)")


@dataclass(frozen=True)
class SpeculativeStep:
    """k proposals a step, kept at `acceptance` per position (vLLM's), and the draft's step model (None:
    a proposer that costs the GPU nothing, as prompt lookup). `proposal_share`: the share of decodes
    that propose (1 for a draft model; prompt lookup's is the server's `spec_drafts_per_decode`)."""

    num_tokens: int
    acceptance: tuple[float, ...]
    draft: StepTimeModel | None = None
    proposal_share: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "acceptance", per_position_acceptance(self.acceptance, self.num_tokens))
        check_share(self.proposal_share)

    def extra_s(self, target: StepTimeModel, shape: BatchShape) -> float:
        seconds = target.per_prefill_token_s * shape.proposal_tokens
        if self.draft is not None:
            seconds += self.draft.step_s(shape.sequences, shape.prefill_tokens, shape.context_tokens)
            if shape.proposing_seqs:
                seconds += (self.num_tokens - 1) * self.draft.step_s(shape.proposing_seqs, 0, shape.context_tokens)
        return seconds

    def draws(self, seed: int) -> AcceptanceDraws:
        return AcceptanceDraws(self.acceptance, seed)

    def proposer(self, seed: int) -> DraftSlots:
        """The scheduler's proposer for this speculation (every decode, or `proposal_share` of them)."""
        return DraftSlots(self.num_tokens, self.proposal_share, seed)

    @property
    def expected_tokens(self) -> float:
        """Tokens a verification of k proposals yields per sequence on average: 1 + the rates' sum."""
        return 1.0 + sum(self.acceptance)
