"""Request bodies of the OpenAI-compatible routes (pydantic; they also make the OpenAPI schema).

Strict about the fields it knows: wrong types are not coerced ("5" is not 5), and OpenAI or
vLLM parameters this server does not implement are accepted only at their no-op value (e.g.
`n` must be 1, `logprobs` null, penalties 0, `top_k` -1 or 0), so nothing a client asks for
is silently dropped. `null` means "default" for every optional parameter, as many clients send it.

Fields it does not know are ignored, as vLLM ignores them (its request models allow extra
fields): routers and clients add their own (vllm-router adds SGLang's extensions to every
request). Each response names them (`ignored_fields.py`). The vLLM/SGLang extensions that
mean something here are fields: `ignore_eos`, `min_tokens`, `stop_token_ids`,
`return_token_ids`, `skip_special_tokens`, `include_stop_str_in_output` / `no_stop_trim`,
`kv_transfer_params` (an emulated worker's disaggregated prefill or decode), and for chat `add_generation_prompt` and `continue_final_message`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_SEED = 2**63 - 1
MAX_STOP_STRINGS = 16


class _OpenAIModel(BaseModel):
    """Known fields typed strictly; unknown ones kept aside (`model_extra`) to be reported, not used."""

    model_config = ConfigDict(extra="allow", strict=True)


class StreamOptions(_OpenAIModel):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False   # vLLM: usage on every chunk


class _SamplingRequest(_OpenAIModel):
    """Fields shared by /v1/completions and /v1/chat/completions."""

    model: str | None = Field(None, description="the served model name; null = the served model")
    max_tokens: int | None = Field(None, ge=1, description="most tokens to generate")
    temperature: float | None = Field(None, ge=0, le=2, description="0 = greedy; default 1")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling mass; default 1")
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="per-request sampling seed")
    stop: str | list[str] | None = Field(None, description="stop strings, not included in the output "
                                                           "(unless include_stop_str_in_output)")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    # vLLM extensions that let load tests fix the output length
    ignore_eos: bool | None = Field(False, description="vLLM: keep generating past end-of-sequence")
    min_tokens: int | None = Field(None, ge=0, description="vLLM: no end-of-sequence before this many tokens")
    stop_token_ids: list[int] | None = Field(None, description="vLLM: token ids that end generation (in token_ids; "
                                                               "their text only with include_stop_str_in_output)")
    return_token_ids: bool | None = Field(False, description="vLLM: add the generated ids (choices[].token_ids) "
                                                             "and the prompt's (prompt_token_ids)")
    skip_special_tokens: bool | None = Field(True, description="vLLM: special tokens add no text; "
                                                               "false writes each as its name (<|eos|>)")
    include_stop_str_in_output: bool | None = Field(
        False, description="vLLM: keep the stop string (or the stop token's text) that ended generation")
    no_stop_trim: bool | None = Field(False, description="SGLang's name for include_stop_str_in_output")
    kv_transfer_params: dict | None = Field(
        None, description="vLLM: disaggregated prefill and decode, as vllm-router sends it "
                          "(reference_server.engine.disaggregation)", strict=False)
    reasoning_tokens: int | None = Field(None, ge=0, description="servecap: chat streams its first N generated tokens "
                                                                 "as reasoning (delta.reasoning_content); default: "
                                                                 "the server's --reasoning-tokens")
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = Field(
        None, description="OpenAI: how much to reason; a draw of the server's --reasoning-effort-tokens for it "
                          "(reasoning_tokens, given, wins)")
    # accepted vLLM sampling parameters at their no-op value only
    top_k: int | None = Field(None, description="only -1 or 0 (no top-k filtering) is supported")
    min_p: float | None = Field(None, description="only 0 is supported")
    repetition_penalty: float | None = Field(None, description="only 1 is supported")
    # accepted OpenAI parameters at their no-op value only
    n: int | None = Field(1, description="only 1 is supported")
    user: str | None = None
    presence_penalty: float | None = Field(None, description="only 0 is supported")
    frequency_penalty: float | None = Field(None, description="only 0 is supported")
    logit_bias: dict[str, float] | None = Field(None, description="only empty is supported")

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, value):
        stops = [value] if isinstance(value, str) else value
        if stops is not None:
            if len(stops) > MAX_STOP_STRINGS:
                raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are supported")
            if any(not s for s in stops):
                raise ValueError("stop strings must be non-empty")
        return value

    @field_validator("stop_token_ids")
    @classmethod
    def _check_stop_token_ids(cls, value):
        if value is not None and any(token_id < 0 for token_id in value):
            raise ValueError("stop_token_ids must be non-negative")
        return value

    @model_validator(mode="after")
    def _check_unsupported(self):
        if self.n not in (None, 1):
            raise ValueError("n: only n=1 is supported; send several requests instead")
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name) not in (None, 0):
                raise ValueError(f"{name}: only 0 is supported by this server")
        if self.logit_bias:
            raise ValueError("logit_bias: not supported by this server")
        if self.top_k not in (None, -1, 0):
            raise ValueError("top_k: only -1 or 0 (no top-k filtering) is supported by this server")
        if self.min_p not in (None, 0):
            raise ValueError("min_p: only 0 is supported by this server")
        if self.repetition_penalty not in (None, 1):
            raise ValueError("repetition_penalty: only 1 is supported by this server")
        if self.min_tokens and self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must not exceed max_tokens ({self.max_tokens})")
        return self

    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def keep_stop(self) -> bool:
        """vLLM's include_stop_str_in_output or SGLang's no_stop_trim: either keeps what ended generation."""
        return bool(self.include_stop_str_in_output or self.no_stop_trim)

    def skips_special_tokens(self) -> bool:
        return self.skip_special_tokens is not False   # null: the default, true


class CompletionRequest(_SamplingRequest):
    """POST /v1/completions. `max_tokens` defaults to 16, as in OpenAI's API."""

    prompt: str | list[int] | list[str] | list[list[int]] = Field(
        ..., description="text, or token ids; a list of several prompts is not supported")
    echo: bool | None = Field(False, description="only false is supported")
    logprobs: int | None = Field(None, description="only null is supported")
    best_of: int | None = Field(None, description="only 1 is supported")
    suffix: str | None = Field(None, description="only null is supported")

    @model_validator(mode="after")
    def _check_completion_only(self):
        if self.echo:
            raise ValueError("echo: not supported by this server")
        if self.logprobs is not None:
            raise ValueError("logprobs: not supported by this server")
        if self.best_of not in (None, 1):
            raise ValueError("best_of: only 1 is supported")
        if self.suffix:
            raise ValueError("suffix: not supported by this server")
        if isinstance(self.prompt, list):
            if not self.prompt:
                raise ValueError("prompt: must not be empty")
            if isinstance(self.prompt[0], (str, list)) and len(self.prompt) != 1:
                raise ValueError(f"prompt: got {len(self.prompt)} prompts; send one prompt per request")
            if isinstance(self.prompt[0], list) and not self.prompt[0]:
                raise ValueError("prompt: must not be empty")
        return self

    def single_prompt(self) -> str | list[int]:
        """The prompt as text or as token ids (a one-element batch unwrapped)."""
        prompt = self.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
            return prompt[0]
        return prompt


class TextPart(_OpenAIModel):
    type: Literal["text"]
    text: str


class FunctionCall(_OpenAIModel):
    name: str
    arguments: str = ""


class ToolCall(_OpenAIModel):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDefinition(_OpenAIModel):
    name: str = Field(..., min_length=1)
    description: str | None = None
    parameters: dict | None = Field(None, strict=False)
    strict: bool | None = None


class Tool(_OpenAIModel):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(_OpenAIModel):
    name: str


class NamedToolChoice(_OpenAIModel):
    type: Literal["function"]
    function: NamedFunction


class ChatMessage(_OpenAIModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = Field(None, description="an assistant's earlier calls")
    tool_call_id: str | None = Field(None, description="a tool message: the call it answers")

    @model_validator(mode="after")
    def _check_tool_fields(self):
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id (the call it answers)")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"tool_calls belong to assistant messages, not {self.role}")
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(_SamplingRequest):
    """POST /v1/chat/completions. Without a limit, generation may run to the model's context."""

    messages: list[ChatMessage] = Field(..., min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, description="newer name of max_tokens")
    logprobs: bool | None = Field(None, description="only false/null is supported")
    top_logprobs: int | None = Field(None, description="only null is supported")
    add_generation_prompt: bool | None = Field(True, description="vLLM: end the prompt with the assistant's "
                                                                 "turn opener")
    continue_final_message: bool | None = Field(
        False, description="vLLM: leave the final message open so the model continues it; "
                           "needs add_generation_prompt false")
    echo: bool | None = Field(False, description="vLLM: only false is supported")
    tools: list[Tool] | None = Field(None, description="functions the model may call (reference_server.api.tool_calls)")
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        None, description="none, auto (the default with tools), required, or a named function")
    parallel_tool_calls: bool | None = Field(None, description="accepted; one call a response is made")

    @model_validator(mode="after")
    def _check_chat_only(self):
        if self.tool_choice not in (None, "none") and not self.tools:
            raise ValueError("tool_choice: no tools were offered")
        if self.logprobs:
            raise ValueError("logprobs: not supported by this server")
        if self.continue_final_message and self.add_generation_prompt is not False:
            raise ValueError("continue_final_message: cannot be used with add_generation_prompt true (its "
                             "default); send add_generation_prompt: false")
        if self.echo:
            raise ValueError("echo: not supported by this server")
        if self.top_logprobs is not None:
            raise ValueError("top_logprobs: not supported by this server")
        if self.max_tokens is not None and self.max_completion_tokens is not None \
                and self.max_tokens != self.max_completion_tokens:
            raise ValueError("max_tokens and max_completion_tokens disagree; send one of them")
        return self

    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens
