"""One request as the scheduler and the block manager see it: ints and lists, no tensors."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

from engine_core.scheduling.sampling import SamplingParams


@dataclass(frozen=True, slots=True)
class RequestTimings:
    """A finished request's phases on the engine's clock (seconds), as vLLM defines them:
    queue = arrival -> first scheduled (a later preemption does not restart it), prefill = first
    scheduled -> first token, decode = first token -> last token, inference = first scheduled -> last token."""

    queue_s: float
    prefill_s: float
    decode_s: float
    inference_s: float


class SequenceStatus(Enum):
    WAITING = auto()   # queued, or preempted and waiting to be recomputed
    RUNNING = auto()   # holds KV blocks
    FINISHED = auto()


@dataclass(eq=False, slots=True)
class Sequence:
    """Token ids (prompt then output) and how far the KV cache has caught up with them.

    `num_computed_tokens` tokens have their K/V in the cache; a step feeds tokens
    `[num_computed_tokens, num_computed_tokens + n)`. A step that reaches `num_tokens`
    samples one new token (a decode step has n == 1); a shorter prefill chunk samples nothing.
    """

    request_id: str
    token_ids: list[int]
    params: SamplingParams
    arrival_time: float
    num_prompt_tokens: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)   # hashes of the leading full, computed blocks
    num_computed_tokens: int = 0
    spec_token_ids: list[int] = field(default_factory=list)   # this step's proposals (speculative decoding)
    num_cached_tokens: int = 0       # prompt tokens served from the prefix cache (latest admission)
    num_preemptions: int = 0
    finish_reason: str | None = None
    lora: str | None = None          # the LoRA adapter it runs with (None: the base model)
    lora_wait_s: float = 0.0         # queue time passed over because its adapter had no slot
    lora_blocked_since: float | None = None   # engine clock: passed over for a slot since then
    # disaggregated decode: its prompt's KV comes from a prefill worker, taking this many seconds once its blocks
    # are allocated (None: it prefills here); then, until `kv_ready_at` (engine clock), it holds its blocks unscheduled
    kv_transfer_s: float | None = None
    kv_ready_at: float | None = None
    kv_received_at: float | None = None   # engine clock: its blocks were allocated and the transfer began
    first_scheduled_time: float | None = None   # engine clock, the first step that scheduled it
    first_token_time: float | None = None
    last_token_time: float | None = None

    def __post_init__(self) -> None:
        self.token_ids = list(self.token_ids)
        if not self.num_prompt_tokens:
            self.num_prompt_tokens = len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def max_total_tokens(self) -> int:
        """Prompt plus the most output it may produce: the worst-case KV footprint."""
        return self.num_prompt_tokens + self.params.max_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def mark_scheduled(self, now: float) -> None:
        if self.first_scheduled_time is None:
            self.first_scheduled_time = now

    def mark_token(self, now: float) -> None:
        if self.first_token_time is None:
            self.first_token_time = now
        self.last_token_time = now

    def timings(self) -> RequestTimings | None:
        """The phases so far; None before the first token."""
        if self.first_scheduled_time is None or self.first_token_time is None:
            return None
        return RequestTimings(queue_s=self.first_scheduled_time - self.arrival_time,
                              prefill_s=self.first_token_time - self.first_scheduled_time,
                              decode_s=self.last_token_time - self.first_token_time,
                              inference_s=self.last_token_time - self.first_scheduled_time)
