"""Disaggregated prefill and decode as vLLM's router drives it, for emulated workers.

`vllm-router --vllm-pd-disaggregation` sends a prefill worker a copy of the request with `max_tokens`
1, `stream` false and `kv_transfer_params: {"do_remote_decode": true}`; the prefill worker answers
with the `kv_transfer_params` a decode worker needs to pull the prompt's KV (vLLM's NixlConnector,
`request_finished`: `do_remote_prefill`, `remote_block_ids`, `remote_engine_id`, `remote_request_id`,
`remote_host`, `remote_port`, `tp_size`); the router then sends the decode worker the original
request with those params. The decode worker allocates the prompt's blocks, receives every prompt
token's KV but the last (vLLM computes the last one again for its logits), and only then runs.

Here no KV moves: the decode worker holds the blocks for the time the transfer would take, the
prompt's KV bytes over the link (`transfer_s`), and never computes the prompt. The prefill worker
holds the sent blocks until the decode worker's read notification (`reference_server.api.kv_transfer`)
or a timeout, as vLLM does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

ROLES = ("both", "prefill", "decode")
SEND, RECEIVE = "send", "receive"
REMOTE_FIELDS = ("remote_block_ids", "remote_engine_id", "remote_request_id", "remote_host", "remote_port")


@dataclass(frozen=True)
class Disaggregation:
    """One worker's side of the contract: its role, its engine id and the link KV arrives over."""

    role: str
    link_bytes_per_s: float
    latency_s: float = 0.0
    tp: int = 1
    engine_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def accepts(self, kv_transfer: str | None) -> str | None:
        """None when this worker takes a request of this kind, else why not (one line)."""
        if kv_transfer == SEND and self.role == "decode":
            return "kv_transfer_params: do_remote_decode asks for a prefill, and this worker only decodes (--role decode)"
        if kv_transfer == RECEIVE and self.role == "prefill":
            return "kv_transfer_params: do_remote_prefill asks for a decode, and this worker only prefills (--role prefill)"
        return None

    def transfer_s(self, prompt_tokens: int, kv_bytes_per_token: float) -> float:
        """Seconds to receive a prompt's KV: every token's but the last, over the link, plus its latency."""
        return self.latency_s + max(prompt_tokens - 1, 0) * kv_bytes_per_token / self.link_bytes_per_s

    def sent(self, request_id: str, block_ids: list[int]) -> dict:
        """The engine's part of a prefill's answer (the server adds where it listens)."""
        return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": list(block_ids),
                "remote_engine_id": self.engine_id, "remote_request_id": request_id, "tp_size": self.tp}

    def describe(self) -> dict:
        return {"role": self.role, "engine_id": self.engine_id, "kv_transfer_gbs": self.link_bytes_per_s / 1e9,
                "kv_transfer_latency_s": self.latency_s,
                "note": "emulated: the decode side holds the prompt's blocks for its KV bytes over the link and "
                        "never computes the prompt; the prefill side holds them until they are read"}


class SentPrompts:
    """A prefill worker's sent prompts: their blocks, held in the block manager until the decode worker has
    read them (`release`) or until their deadline passes (`expire`), as vLLM's NixlConnector holds them."""

    def __init__(self, block_manager) -> None:
        self.block_manager = block_manager
        self._held: dict[str, tuple[list[int], float]] = {}   # request id -> (blocks, engine-clock deadline)

    def __bool__(self) -> bool:
        return bool(self._held)

    def hold(self, request_id: str, block_ids: list[int], deadline: float) -> None:
        self.block_manager.hold(block_ids)
        self._held[request_id] = (block_ids, deadline)

    def release(self, request_id: str) -> bool:
        """The decode worker read it: its blocks go back. False when none are held for it."""
        held = self._held.pop(request_id, None)
        if held is not None:
            self.block_manager.release(held[0])
        return held is not None

    def expire(self, now: float) -> None:
        """Sent prompts no decode worker read in time: their blocks go back."""
        for request_id in [r for r, (_, deadline) in self._held.items() if deadline <= now]:
            self.release(request_id)


def kv_transfer_kind(params: object) -> str | None:
    """SEND, RECEIVE or None for a request's `kv_transfer_params`; ValueError names what is wrong."""
    if params is None:
        return None
    if not isinstance(params, dict):
        raise ValueError(f"kv_transfer_params must be an object, got {type(params).__name__}")
    remote_decode, remote_prefill = params.get("do_remote_decode"), params.get("do_remote_prefill")
    for name, value in (("do_remote_decode", remote_decode), ("do_remote_prefill", remote_prefill)):
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"kv_transfer_params.{name} must be true or false, got {value!r}")
    if remote_decode and remote_prefill:
        raise ValueError("kv_transfer_params: do_remote_decode and do_remote_prefill are both true; a request "
                         "is either a prefill for a decode worker or a decode of a remote prefill")
    if remote_prefill:
        missing = [name for name in REMOTE_FIELDS if params.get(name) is None]
        if missing:
            raise ValueError(f"kv_transfer_params: do_remote_prefill needs {', '.join(missing)} "
                             "(the prefill worker's answer carries them)")
        blocks = params["remote_block_ids"]
        if not isinstance(blocks, list) or not blocks or any(isinstance(b, bool) or not isinstance(b, int)
                                                             or b < 0 for b in blocks):
            raise ValueError("kv_transfer_params.remote_block_ids must be a non-empty list of block ids")
        return RECEIVE
    return SEND if remote_decode else None
