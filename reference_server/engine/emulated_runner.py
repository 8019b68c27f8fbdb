"""The forward pass of an emulated GPU: no tensors, a wait for the time that GPU would take, seeded tokens.

    EmulatedRunner(step_model, EmulatedTokens(seed, ids), seed=, jitter_cv=).run(batch, shape, started) -> tokens

A step lasts the step model's time for its batch shape (sequences, prefill tokens, context tokens:
`calculators.gpu_engine`), counted from when the engine began the step, so that the scheduling and
bookkeeping the real engine does on its host CPU sit inside it, as they do on a GPU server. The work
after the wait (sampling's bookkeeping, the step record) and the sleep's own overshoot are learnt
from the steps so far (`settle`, a moving average of realised minus modelled) and taken off the next
deadline, so that a step as the engine records it lasts what the model says. The wait
is a sleep to a deadline on the monotonic clock: a replica costs its host next to no CPU while its GPU
would be busy, so one machine can run many. `jitter_cv` > 0 stretches or shrinks each step by a
seeded lognormal factor of that coefficient of variation (mean 1).

With speculative decoding (emulated acceptance, `calculators.sim.speculative_step`), a step also
lasts the verification's extra tokens and the draft's passes; each proposing sequence keeps as many
proposals as the seeded draws say, and gets that many tokens plus one from its generator.

Tokens come from a seeded generator per request (the request's own seed when it gave one), among the
ids that read as text on their own (`EmulatedTokens`), never the end-of-sequence token: a request runs
to its max_tokens or a stop string, as a benchmark with ignore_eos does. No weights exist, so none are allocated.
"""

from __future__ import annotations

import math
import random
import time

from calculators.sim.speculative_step import SpeculativeStep
from calculators.sim.step_model import StepTimeModel
from engine_core.scheduling.batch_shape import BatchShape
from engine_core.scheduling.postprocess import samples_token
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.strategies.base import ScheduledBatch


SETTLE_WEIGHT = 0.1   # the moving average's weight of the newest step (about the last ten steps)


class EmulatedTokens:
    """One seeded generator per request (its tokens do not depend on what it was batched with), drawing
    among `ids`: the tokens that read as text on their own (`ByteTokenizer.text_ids`), never the
    end-of-sequence token. A real model writes word pieces that are whole characters; uniformly drawn
    bytes are not: about one in five starts a multi-byte character that the server holds back until
    the next token (as vLLM's detokenizer does), and a special id has no text, so a stream's first
    visible token would come one or more steps after the first token, a delay no GPU has."""

    def __init__(self, seed: int, ids: list[int]) -> None:
        if not ids:
            raise ValueError("an emulated model needs at least one token id to write")
        self.seed = seed
        self.ids = list(ids)
        self._generators: dict[str, random.Random] = {}

    def next_token(self, seq: Sequence) -> int:
        rng = self._generators.get(seq.request_id)
        if rng is None:
            own = seq.params.seed
            rng = self._generators[seq.request_id] = random.Random(
                f"{own}" if own is not None else f"{self.seed}/{seq.request_id}")
        return self.ids[rng.randrange(len(self.ids))]

    def forget(self, request_id: str) -> None:
        self._generators.pop(request_id, None)


class EmulatedRunner:
    def __init__(self, step_model: StepTimeModel, tokens: EmulatedTokens, *, seed: int = 0,
                 jitter_cv: float = 0.0, speculative: SpeculativeStep | None = None, sleep=time.sleep,
                 clock=time.perf_counter) -> None:
        if not (isinstance(jitter_cv, (int, float)) and jitter_cv >= 0 and math.isfinite(jitter_cv)):
            raise ValueError(f"step jitter must be a coefficient of variation >= 0, got {jitter_cv!r}")
        self.step_model = step_model
        self.tokens = tokens
        self.speculative = speculative
        self._draws = None if speculative is None else speculative.draws(seed)
        self.jitter_cv = float(jitter_cv)
        self._jitter = random.Random(f"step-jitter/{seed}")
        self._sigma = math.sqrt(math.log1p(self.jitter_cv ** 2))   # lognormal with this cv and mean 1
        self._sleep, self._clock = sleep, clock
        self.last_forward_s = 0.0
        self.last_modelled_s = 0.0
        self.overshoot_s = 0.0   # moving average of realised - modelled step time (what the deadline leaves out)

    def modelled_s(self, shape: BatchShape) -> float:
        """The step's time on the emulated GPU, jitter included (one draw per call)."""
        seconds = self.step_model.step_s(shape.sequences, shape.prefill_tokens, shape.context_tokens)
        if self.speculative is not None:
            seconds += self.speculative.extra_s(self.step_model, shape)
        if self.jitter_cv:
            seconds *= math.exp(self._jitter.gauss(-self._sigma ** 2 / 2, self._sigma))
        return seconds

    def run(self, batch: ScheduledBatch, shape: BatchShape, started: float) -> list[int | list[int] | None]:
        """Wait until `started` (the engine's step start, on `clock`) + the modelled time; then a token for
        every sequence whose step reaches its last token (None: a prefill chunk mid-prompt)."""
        self.last_modelled_s = self.modelled_s(shape)
        deadline = started + max(0.0, self.last_modelled_s - self.overshoot_s)
        begin = self._clock()
        while (left := deadline - self._clock()) > 0:
            self._sleep(left)
        self.last_forward_s = self._clock() - begin
        return [self._tokens(seq) if samples_token(seq, n) else None
                for seq, n in zip(batch.seqs, batch.num_new_tokens)]

    def _tokens(self, seq: Sequence) -> int | list[int]:
        """One token, or for a verification the drawn count of kept proposals plus one, from the request's generator."""
        if not seq.spec_token_ids:
            return self.tokens.next_token(seq)
        return [self.tokens.next_token(seq) for _ in range(self._draws.accepted(len(seq.spec_token_ids)) + 1)]

    def settle(self, realised_s: float) -> None:
        """The engine's measure of the step just run (its record's step_s): learn what the wait left out."""
        error = realised_s - max(0.0, self.last_modelled_s - self.overshoot_s)
        self.overshoot_s += SETTLE_WEIGHT * (min(error, self.last_modelled_s) - self.overshoot_s)
