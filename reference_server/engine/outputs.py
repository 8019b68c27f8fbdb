"""What the engine hands its callers: each step's outputs, its stats, and the rejection error.

Torch-free on purpose: these cross the engine process's pipe (`runtime.engine_process`), and
unpickling one imports its defining module in the serving process. When they lived in
`engine.engine`, the first step's message made the serving process import the model code on
the pipe's reader thread after /ready: about 110 ms of imports that the first request's
first token waited for (measured on tiny, issue 17).
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_server.engine.step_recorder import EngineRecords
from engine_core.scheduling.sequence import RequestTimings


class RequestRejected(ValueError):
    """The request can never be served as asked (too long, bad ids, duplicate id)."""


@dataclass
class StepOutput:
    request_id: str
    new_token_ids: list[int]
    finished: bool
    finish_reason: str | None          # "stop" | "length" | None
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_prompt_tokens: int      # prefix-cache hit tokens for this request
    timings: RequestTimings | None = None   # set on the finishing output: queue, prefill, decode, inference
    kv_transfer_params: dict | None = None  # a prefill for a decode worker, on its finishing output: its blocks


@dataclass
class EngineStats:
    num_running: int
    num_waiting: int
    kv_blocks_used: int
    kv_blocks_total: int
    last_batch_size: int
    last_step_s: float
    last_forward_s: float
    total_prefix_cache_hit_tokens: int
    total_prefix_cache_queries: int
    total_preemptions: int
    total_steps: int
    last_num_tokens: int = 0           # tokens computed in the last step (== last_batch_size: all decodes)
    spec_drafts: int = 0               # speculative decoding (vLLM's spec_decode counters): verification steps
    spec_draft_tokens: int = 0         #   proposals verified
    spec_accepted_tokens: int = 0      #   proposals kept
    spec_accepted_per_position: tuple[int, ...] = ()   # proposals kept at position 1, 2, ..., k
    lora_running: tuple[str, ...] = ()   # LoRA adapters of the running sequences (vLLM's lora_requests_info)
    lora_waiting: tuple[str, ...] = ()   #   and of the waiting ones
    records: EngineRecords = EngineRecords()   # step and request records since the previous stats()
