"""Speculative decoding as arithmetic: does it pay at this batch, for this acceptance, on this GPU?

A draft proposes k tokens per sequence; the target verifies all of them in one forward pass over
k + 1 tokens per sequence and keeps the longest agreeing prefix plus one token of its own. With
acceptance r_i at position i as vLLM reports it (of the drafts, the share whose i-th proposal was
kept; one rate a stands for a^i: `scheduling.speculative.per_position_acceptance`), a verification
step yields per sequence

    expected_tokens = 1 + sum_{i=1..k} r_i        ( = (1 - a^(k+1)) / (1 - a) for one a )

and costs
    verify_s = the target's decode step with k + 1 tokens per sequence (`step_cost.decode_cost`,
               tokens_per_seq: weights and KV read once, FLOPs for every token)
    draft_s  = k decode steps of the draft model at the same batch and context ("draft"), or 0
               ("ngram": prompt lookup runs on the host, off the GPU's clock)
    TPOT with speculation = (draft_s + verify_s) / expected_tokens;  without = the plain decode step

At low batch a decode step is bound by reading the weights, so k + 1 tokens cost about one and
speculation divides TPOT by about expected_tokens; as the batch grows the step turns compute
bound, the k + 1 tokens cost k + 1 times as much and the rejected ones are wasted work. At a fixed
batch, tokens/s = batch / TPOT, so the batch above which speculation stops lowering TPOT is the
one above which it lowers throughput (the two part only where the batch itself changes with
speculation: a closed loop's requests finish sooner, the simulator's question). Pure: numbers in.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import default_kv_dtype, parse_dtype, parse_kv_dtype
from calculators.efficiency_profile import EfficiencyProfile, efficiencies_for
from engine_core.gpus import GpuSpec
from calculators.step_cost import decode_cost
from engine_core.scheduling.speculative import per_position_acceptance

METHODS = ("draft", "ngram")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Speculation:
    """The speculation asked for: the method, k proposals, and the acceptance: one rate, or one per
    position as vLLM reports them (stored per position)."""

    method: str
    num_tokens: int
    acceptance: tuple[float, ...]
    draft: ModelArchitecture | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method must be one of {', '.join(METHODS)}, got {self.method!r}")
        object.__setattr__(self, "acceptance", per_position_acceptance(self.acceptance, self.num_tokens))
        if self.method == "draft" and self.draft is None:
            raise ValueError("speculative method draft needs the draft model (--speculative-model)")

    @property
    def expected_tokens(self) -> float:
        """Tokens a verification step yields per sequence: the accepted prefix's expected length, plus one."""
        return 1.0 + sum(self.acceptance)


@dataclass(frozen=True)
class SpeculativeRow:
    batch: int
    plain_step_s: float
    verify_step_s: float
    draft_s: float
    tpot_plain_s: float
    tpot_speculative_s: float
    tokens_per_s_plain: float
    tokens_per_s_speculative: float
    speedup: float                 # plain TPOT / speculative TPOT (> 1: speculation pays)


@dataclass(frozen=True)
class SpeculativeAnswer:
    method: str
    num_speculative_tokens: int
    acceptance: tuple[float, ...]
    expected_tokens_per_step: float
    context: int
    rows: tuple[SpeculativeRow, ...]
    crossover_batch: int | None    # the first batch asked where speculation's TPOT is no lower (None: never)
    note: str


def speculative_decode(arch: ModelArchitecture, gpu: GpuSpec, speculation: Speculation, *, dtype: str = "bf16",
                       kv_dtype: str | None = None, tp: int = 1, context: int = 1024,
                       batches: tuple[int, ...] = BATCHES, profile: EfficiencyProfile | None = None,
                       engine: str | None = None) -> SpeculativeAnswer:
    """With and without `speculation`, at each batch of `batches` (sequences at mean `context`)."""
    if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
        raise ValueError("batches must be positive integers")
    dt = parse_dtype(dtype)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(dt))
    eff = efficiencies_for(gpu, dt, tp, profile=profile, engine=engine)
    k, expected = speculation.num_tokens, speculation.expected_tokens
    rows = []
    for b in sorted(set(batches)):
        plain = decode_cost(arch, gpu, dt, kv_dt, batch=b, context=context, tp=tp, eff=eff).total_s
        verify = decode_cost(arch, gpu, dt, kv_dt, batch=b, context=context, tp=tp, eff=eff,
                             tokens_per_seq=k + 1).total_s
        draft = 0.0
        if speculation.method == "draft":
            draft = k * decode_cost(speculation.draft, gpu, dt, kv_dt, batch=b, context=context, tp=tp,
                                    eff=eff).total_s
        spec_tpot = (draft + verify) / expected
        rows.append(SpeculativeRow(b, plain, verify, draft, plain, spec_tpot, b / plain, b / spec_tpot,
                                   plain / spec_tpot))
    crossover = next((row.batch for row in rows if row.tpot_speculative_s >= row.tpot_plain_s), None)
    note = ("speculation lowers TPOT at every batch asked" if crossover is None else
            f"speculation stops lowering TPOT, and starts lowering tokens/s, at batch {crossover}")
    return SpeculativeAnswer(speculation.method, k, speculation.acceptance, expected, context, tuple(rows),
                             crossover, note)
