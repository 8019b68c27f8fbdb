"""`continuous`: iteration-level batching (Orca/vLLM) with chunked prefill and preemption.

Every step: running sequences first (admission order), each takes its next chunk (one token
when decoding) out of `max_num_batched_tokens`; when KV blocks run out the newest running
sequence is preempted (blocks freed, recomputed later from its tokens). Then waiting
requests are admitted, oldest first, while `max_num_seqs`, the token budget and free blocks
allow, unless something was preempted this step. Finished sequences leave at once. With LoRA
adapters, a request whose adapter would exceed the slots is passed over (`scheduling.lora_slots`).

Decodes are preferred (Sarathi-Serve's stall-free batching): while any sequence is decoding,
prompt tokens (prefill chunks, running or newly admitted) share at most
`max_prefill_tokens_with_decodes` of the step, so a long prompt arriving cannot stretch the
step every decoding sequence waits on; with nothing decoding, a prompt gets the whole
budget. On `small` on a 2-core CPU a 2048-token prefill step took 4 s, against 0.16 s for a
decode step of 32 (`python -m reference_server.engine_bench`, `decode_step_ms`).

Two engine behaviours that shape the time to first token are limits too, so a GPU engine's profile
(calculators.engine_profiles) can set them:
- `chunked_prefill` off (TensorRT-LLM's default, `enable_chunked_prefill=False`): a prompt is
  admitted only when all of it fits the step's remaining token budget, and runs in one step; a
  prompt longer than the whole budget runs alone in a step of its own (the engine would refuse it).
- `capacity_policy` `guaranteed-no-evict` (TensorRT-LLM's default `CapacitySchedulerPolicy`): a
  request is admitted only when the free blocks cover its own prompt plus max_tokens and what every
  running request may still grow to, so nothing is ever preempted; `max-utilization` allocates a
  prompt's blocks only and preempts the newest when they run out (vLLM's way).
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.checks import non_negative_int, positive_int
from engine_core.scheduling.lora_slots import LoraSlots
from engine_core.scheduling.sequence import Sequence, SequenceStatus
from engine_core.scheduling.speculative import DraftSlots, NgramProposer
from engine_core.scheduling.strategies.base import ScheduledBatch, Scheduler, Strategy
from engine_core.scheduling.strategies.limits import Limits, limit, parse_on_off

MAX_UTILIZATION, GUARANTEED_NO_EVICT = "max-utilization", "guaranteed-no-evict"
CAPACITY_POLICIES = (MAX_UTILIZATION, GUARANTEED_NO_EVICT)


@dataclass(frozen=True)
class ContinuousLimits(Limits):
    """`max_num_seqs` running at once; `max_num_batched_tokens` computed per step (chunked prefill),
    of which prompt tokens take at most `max_prefill_tokens_with_decodes` while sequences decode."""

    max_num_seqs: int = limit(32, "most running sequences")
    max_num_batched_tokens: int = limit(2048, "tokens per step")
    max_prefill_tokens_with_decodes: int = limit(
        256, "prompt tokens a step may add while sequences decode (0 = up to the step's token budget)")
    chunked_prefill: bool = limit(True, "split a prompt across steps (on) or admit it only whole (off)",
                                  parse=parse_on_off, choices=(True, False), metavar="on|off")
    capacity_policy: str = limit(MAX_UTILIZATION, "max-utilization (allocate the prompt, preempt when out) or "
                                                  "guaranteed-no-evict (reserve prompt + max_tokens)",
                                 choices=CAPACITY_POLICIES)

    def __post_init__(self) -> None:
        positive_int("max_num_seqs", self.max_num_seqs)
        positive_int("max_num_batched_tokens", self.max_num_batched_tokens)
        non_negative_int("max_prefill_tokens_with_decodes", self.max_prefill_tokens_with_decodes)
        if not isinstance(self.chunked_prefill, bool):
            raise ValueError(f"chunked_prefill must be true or false, got {self.chunked_prefill!r}")
        if self.capacity_policy not in CAPACITY_POLICIES:
            raise ValueError(f"capacity_policy must be one of {', '.join(CAPACITY_POLICIES)}, "
                             f"got {self.capacity_policy!r}")

    @property
    def max_running(self) -> int:
        return self.max_num_seqs


class ContinuousBatchScheduler(Scheduler):
    limits: ContinuousLimits
    steady_decodes = True   # running decodes first; admission fails again with no more free blocks
    proposer: NgramProposer | DraftSlots | None = None   # speculative decoding: a decode verifies its proposals
    lora_slots: LoraSlots | None = None   # multi-LoRA: admission waits for one of max_loras adapter slots

    def schedule(self, now: float) -> ScheduledBatch | None:
        batch = ScheduledBatch()
        seqs, counts = batch.seqs, batch.num_new_tokens   # appended in place of batch.add: once per sequence
        budget = self.limits.max_num_batched_tokens
        prefill_budget = self._prefill_budget()
        bm = self.block_manager
        room = bm.block_size
        for seq in list(self.running):
            if budget == 0:
                break
            if seq.status is not SequenceStatus.RUNNING:   # preempted earlier in this loop
                continue
            if seq.kv_ready_at is not None:   # its prompt's KV is still arriving from a prefill worker
                if seq.kv_ready_at > now:
                    continue
                seq.kv_ready_at = None
            n = min(len(seq.token_ids) - seq.num_computed_tokens, budget)
            if n > 1:   # a prefill chunk
                n = min(n, prefill_budget)
                if n == 0:
                    continue
            elif self.proposer is not None:
                n += self._propose(seq, budget - 1)
            if seq.num_computed_tokens + n > len(seq.block_table) * room:   # bm.blocks_needed > 0: rare in decode
                while not bm.can_append(seq, n):
                    victim = self.running[-1]
                    self._preempt(victim, batch)
                    if victim is seq:
                        break
                if seq.status is not SequenceStatus.RUNNING:
                    continue
                bm.may_append(seq, n)
            seqs.append(seq)
            counts.append(n)
            budget -= n
            if n > 1:
                prefill_budget -= n
        passed_over: list[Sequence] = []   # waiting for a LoRA slot: they keep their place at the front
        whole = not self.limits.chunked_prefill
        reserved = (self._growth_reserved() if self.limits.capacity_policy == GUARANTEED_NO_EVICT and self.waiting
                    else None)   # (only admission reads it)
        while (self.waiting and not batch.preempted and min(budget, prefill_budget) > 0
               and len(self.running) < self.limits.max_num_seqs):
            seq = self.waiting[0]
            if self.lora_slots is not None and not self._slot_for(seq, now):
                passed_over.append(self.waiting.popleft())
                continue
            if not self.block_manager.can_allocate(seq):
                break
            if reserved is not None:
                worst = bm.blocks_for(seq.max_total_tokens)
                if worst + reserved > bm.num_free_blocks and self.running:
                    break   # (alone, a request longer than the cache runs: max_model_len bounds it)
            if whole and seq.num_tokens > min(budget, prefill_budget) and batch.seqs:
                break   # the whole prompt asked for: its cached prefix is not known before allocation
            self.waiting.popleft()
            self._admit(seq)
            if reserved is not None:
                reserved += worst - len(seq.block_table)
            if seq.kv_transfer_s is not None:   # disaggregated decode: the blocks wait for the prefill worker's KV
                self._receive_prompt(seq, now)
                continue
            n = seq.num_uncomputed_tokens if whole else min(seq.num_uncomputed_tokens, budget, prefill_budget)
            batch.add(seq, n)
            budget -= n
            prefill_budget -= n
        self.waiting.extendleft(reversed(passed_over))
        return batch if batch.seqs else None

    @staticmethod
    def _receive_prompt(seq: Sequence, now: float) -> None:
        """A prompt whose KV a prefill worker computed: every token but the last is received (the last is
        computed here for its logits, as vLLM's scheduler does after a remote prefill), ready once the
        transfer that starts now ends. One transfer a request: if preempted, it is recomputed here."""
        seq.num_computed_tokens = max(seq.num_computed_tokens, seq.num_prompt_tokens - 1)
        seq.kv_received_at, seq.kv_ready_at = now, now + seq.kv_transfer_s
        seq.kv_transfer_s = None

    def _slot_for(self, seq: Sequence, now: float) -> bool:
        """Whether `seq`'s adapter may run beside the running ones; times how long it was passed over."""
        if self.lora_slots.admits(seq.lora, self.running):
            if seq.lora_blocked_since is not None:
                seq.lora_wait_s += now - seq.lora_blocked_since
                seq.lora_blocked_since = None
            return True
        if seq.lora_blocked_since is None:
            seq.lora_blocked_since = now
        return False

    def _propose(self, seq: Sequence, budget: int) -> int:
        """Set `seq`'s proposals for this step (none on a prompt's last token, or before its min_tokens); how
        many. At most what its max_tokens leaves after the target's own token, and the budget."""
        params = seq.params
        room = min(budget, params.max_tokens - seq.num_output_tokens - 1)
        proposals = []
        decoding = seq.num_computed_tokens >= seq.num_prompt_tokens   # not a chunked prompt's last token
        if decoding and seq.num_output_tokens >= params.min_tokens and room > 0:
            proposals = self.proposer.propose(seq.token_ids, room)
        seq.spec_token_ids = proposals
        return len(proposals)

    def _growth_reserved(self) -> int:
        """Blocks the running sequences may still take, up to prompt + max_tokens each (guaranteed-no-evict)."""
        bm = self.block_manager
        return sum(max(0, bm.blocks_for(seq.max_total_tokens) - len(seq.block_table)) for seq in self.running)

    def _prefill_budget(self) -> int:
        """Prompt tokens this step may compute: capped while any running sequence decodes."""
        cap = self.limits.max_prefill_tokens_with_decodes
        if cap and any(seq.num_uncomputed_tokens == 1 for seq in self.running):
            return min(cap, self.limits.max_num_batched_tokens)
        return self.limits.max_num_batched_tokens

    def seconds_until_schedulable(self, now: float) -> float | None:
        if self.waiting:
            return 0.0
        if not self.running:
            return None
        arriving = [seq.kv_ready_at for seq in self.running if seq.kv_ready_at is not None]
        if len(arriving) < len(self.running):
            return 0.0
        return max(0.0, min(arriving) - now)   # every running sequence waits for a prefill worker's KV

    def _preempt(self, seq: Sequence, batch: ScheduledBatch) -> None:
        """Recompute-preemption: free `seq`'s blocks and put it at the front of the queue."""
        self.running.remove(seq)
        seq.spec_token_ids = []
        seq.kv_ready_at = None   # a received prompt's blocks go too: it is recomputed here
        self.block_manager.deallocate(seq, preempted=True)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)
        batch.preempted.append(seq)


STRATEGY = Strategy("continuous", ContinuousLimits, ContinuousBatchScheduler,
                    "iteration-level batching with chunked prefill and preemption")
