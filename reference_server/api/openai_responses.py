"""OpenAI response bodies (plain dicts): completion, chat completion, and their stream chunks.

Streaming emits one chunk per engine output (normally one token), the first carrying
the chat `role`; the chunk with `finish_reason` is the last choice chunk; with
`stream_options.include_usage` a final chunk has `choices: []` and the usage, and
every earlier chunk has `usage: null`, as in OpenAI's API. A reasoning response (`api.reasoning`)
streams its first tokens as `delta.reasoning_content` (and `reasoning`), puts them in
`message.reasoning_content` when not streamed, and counts them in
`usage.completion_tokens_details.reasoning_tokens`.
"""

from __future__ import annotations

import time
import uuid

from reference_server.api.generation import Delta
from reference_server.api.reasoning import ReasoningSplit


def new_response_id(prefix: str) -> str:
    """Unique per response (loadgen joins its records on it): e.g. 'chatcmpl-3f2a...'."""
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0,
          reasoning_tokens: int | None = None) -> dict:
    """OpenAI's usage; `reasoning_tokens` (a reasoning response) adds completion_tokens_details as OpenAI's API does."""
    body = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_prompt_tokens},
    }
    if reasoning_tokens is not None:
        body["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return body


class ResponseShape:
    """Builds the bodies of one response; `chat` picks chat.completion vs text_completion."""

    def __init__(self, *, chat: bool, model: str, include_usage: bool = False,
                 continuous_usage: bool = False, prompt_token_ids: list[int] | None = None,
                 reasoning: ReasoningSplit | None = None) -> None:
        """`prompt_token_ids`: given when the request asked `return_token_ids` (vLLM's extension): every
        choice then carries its `token_ids`, and the prompt's ids go where vLLM puts them (completions:
        in the choice; chat: beside the choices). `reasoning`: a chat response that reasons first
        (`api.reasoning`)."""
        self.reasoning = reasoning
        self.chat = chat
        self.prompt_token_ids = prompt_token_ids
        self.model = model
        self.include_usage = include_usage
        self.continuous_usage = continuous_usage and include_usage
        self.id = new_response_id("chatcmpl" if chat else "cmpl")
        self.created = int(time.time())
        self._sent_role = False
        self._sent_prompt_ids = False
        self.tool_call = None   # a CallStream when this reply is a tool call (`api.tool_calls`)

    def full(self, deltas: list[Delta], finish_reason: str | None, last: Delta | None, prompt_tokens: int,
             token_ids: list[int] | None = None) -> dict:
        """The non-streaming body, from the response's deltas in order."""
        text = "".join(delta.text for delta in deltas)
        if self.chat and self.tool_call is not None:   # the generated tokens are the call's text
            self.tool_call.advance(sum(delta.num_new_tokens for delta in deltas))
            message = {"role": "assistant", "content": None, "tool_calls": self.tool_call.message_calls()}
            choice = {"index": 0, "message": message, "logprobs": None,
                      "finish_reason": self._call_finish(finish_reason)}
        elif self.chat:
            message = {"role": "assistant", "content": text}
            if self.reasoning is not None:
                kinds = [self.reasoning.is_reasoning(delta.num_new_tokens) for delta in deltas]
                message = {"role": "assistant",
                           "content": "".join(d.text for d, thinking in zip(deltas, kinds) if not thinking),
                           "reasoning_content": "".join(d.text for d, thinking in zip(deltas, kinds) if thinking)}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        counts = (last.prompt_tokens, last.completion_tokens, last.cached_prompt_tokens) if last \
            else (prompt_tokens, 0, 0)
        body = {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": [choice],
                "usage": usage(*counts, self._reasoning_tokens())}
        self._add_token_ids(body, choice, list(token_ids or []))
        return body

    def _add_token_ids(self, body: dict, choice: dict, token_ids: list[int]) -> None:
        if self.prompt_token_ids is None:
            return
        choice["token_ids"] = token_ids
        (body if self.chat else choice)["prompt_token_ids"] = self.prompt_token_ids

    def _call_finish(self, finish_reason: str | None) -> str | None:
        """A call generated whole ends `tool_calls`; one cut by max_tokens keeps `length`."""
        if finish_reason is None:
            return None
        return "tool_calls" if self.tool_call.done >= len(self.tool_call.call.text.encode()) else finish_reason

    def chunk(self, delta: Delta) -> dict:
        """One streamed choice chunk."""
        if self.chat and self.tool_call is not None:
            content = self.tool_call.advance(delta.num_new_tokens) or {}
            if not self._sent_role:
                content = {"role": "assistant", **content}
                self._sent_role = True
            choice = {"index": 0, "delta": content, "logprobs": None,
                      "finish_reason": self._call_finish(delta.finish_reason)}
        elif self.chat:
            thinking = self.reasoning is not None and self.reasoning.is_reasoning(delta.num_new_tokens)
            content: dict = {"reasoning_content": delta.text, "reasoning": delta.text} if thinking \
                else {"content": delta.text}
            if not self._sent_role:
                content = {"role": "assistant", **content}
                self._sent_role = True
            choice = {"index": 0, "delta": content, "logprobs": None, "finish_reason": delta.finish_reason}
        else:
            choice = {"index": 0, "text": delta.text, "logprobs": None, "finish_reason": delta.finish_reason}
        body = self._chunk_envelope([choice])
        if self.prompt_token_ids is not None:
            choice["token_ids"] = list(delta.token_ids)
            if not self._sent_prompt_ids:   # the prompt's ids once, in the first chunk
                (body if self.chat else choice)["prompt_token_ids"] = self.prompt_token_ids
                self._sent_prompt_ids = True
        if self.include_usage:
            body["usage"] = usage(delta.prompt_tokens, delta.completion_tokens, delta.cached_prompt_tokens,
                                  self._reasoning_tokens()) if self.continuous_usage else None
        return body

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int) -> dict:
        """The final `choices: []` chunk of `stream_options.include_usage`."""
        body = self._chunk_envelope([])
        body["usage"] = usage(prompt_tokens, completion_tokens, cached_prompt_tokens, self._reasoning_tokens())
        return body

    def _reasoning_tokens(self) -> int | None:
        return self.reasoning.tokens if self.reasoning is not None else None

    def _chunk_envelope(self, choices: list) -> dict:
        return {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": choices}
