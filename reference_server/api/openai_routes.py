"""OpenAI-compatible routes: /v1/completions, /v1/chat/completions, /v1/models, /v1/engine.

Prompt tokens (what `usage.prompt_tokens` counts, exactly):
- completions, text prompt: `<|bos|>` + one id per UTF-8 byte;
- completions, token-id prompt: the ids as given (no BOS added);
- chat: see `chat_template.py`.

Every generation response, streamed or not, names the request fields this server ignored
in its `x-servecap-ignored-fields` header (`ignored_fields.py`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from reference_server.api.chat_template import render_chat
from reference_server.api.errors import APIError
from reference_server.api.generation import Generation
from reference_server.api.ignored_fields import ignored_fields_headers
from reference_server.api.reasoning import ReasoningSplit
from reference_server.api.openai_responses import ResponseShape
from reference_server.api.openai_schemas import (ChatCompletionRequest, CompletionRequest, NamedToolChoice,
                                                 _SamplingRequest)
from reference_server.api.tool_calls import CallStream, call_block, choose_call, response_block, tools_block
from reference_server.api.output_text import OutputText
from reference_server.api.sse import DONE, SSE_MEDIA_TYPE, sse_event
from engine_core.scheduling.sampling import SamplingParams
from reference_server.api.kv_transfer import read_remote_kv
from reference_server.engine.disaggregation import RECEIVE, kv_transfer_kind

DEFAULT_COMPLETION_MAX_TOKENS = 16   # OpenAI's default for /v1/completions

router = APIRouter(prefix="/v1", tags=["openai"])


@router.get("/models")
async def list_models(request: Request) -> dict:
    """The served model, with the engine's configuration under `engine` (see /v1/engine)."""
    runtime = request.app.state.runtime
    return {"object": "list", "data": [_model_card(runtime), *(_adapter_card(runtime, name, source)
                                                               for name, source in runtime.lora_sources.items())]}


@router.get("/models/{model_id:path}")
async def retrieve_model(model_id: str, request: Request) -> dict:
    runtime = request.app.state.runtime
    runtime.check_model(model_id)
    if model_id in runtime.lora_sources:
        return _adapter_card(runtime, model_id, runtime.lora_sources[model_id])
    return _model_card(runtime)


@router.get("/engine")
async def engine_info(request: Request) -> dict:
    """`engine.describe()` (strategy, limits, block size, KV blocks and bytes) plus serving limits."""
    return request.app.state.runtime.describe()


def _completion_prompt_ids(body: CompletionRequest, runtime) -> list[int]:
    runtime.check_model(body.model)
    prompt = body.single_prompt()
    if isinstance(prompt, str):
        return runtime.tokenizer.encode(prompt, add_bos=True)
    prompt_ids = list(prompt)
    bad = [t for t in prompt_ids if not 0 <= t < runtime.token_space.vocab_size]
    if bad:
        raise APIError(400, f"prompt: token ids must be in [0, {runtime.token_space.vocab_size}), "
                            f"got {bad[:5]}", param="prompt")
    return prompt_ids


def _chat_prompt_ids(body: ChatCompletionRequest, runtime) -> list[int]:
    runtime.check_model(body.model)
    return render_chat(runtime.tokenizer, _turns(body),
                       add_generation_prompt=body.add_generation_prompt is not False,
                       continue_final_message=bool(body.continue_final_message))


def _turns(body: ChatCompletionRequest) -> list[tuple[str, str]]:
    """(role, text) turns, tools as the Qwen/Hermes templates write them (`api.tool_calls`)."""
    turns = []
    for message in body.messages:
        if message.role == "tool":
            turns.append(("user", response_block(message.text())))
            continue
        text = message.text() + "".join(call_block(c.function.name, c.function.arguments)
                                        for c in message.tool_calls or ())
        turns.append((message.role, text))
    if body.tools:
        block = tools_block([tool.model_dump(exclude_none=True) for tool in body.tools])
        first = next((k for k, (role, _) in enumerate(turns) if role in ("system", "developer")), None)
        if first is None:
            turns.insert(0, ("system", block.lstrip("\n")))
        else:
            turns[first] = (turns[first][0], turns[first][1] + block)
    return turns


@router.post("/completions/render")
async def render_completion(body: CompletionRequest, request: Request) -> dict:
    """vLLM's render endpoint: the prompt's token ids as this request would be served, generating
    nothing (vLLM's router reads them to route `cache_aware` on tokens)."""
    return _rendered(_completion_prompt_ids(body, request.app.state.runtime))


@router.post("/chat/completions/render")
async def render_chat_completion(body: ChatCompletionRequest, request: Request) -> dict:
    """vLLM's render endpoint for chat: the templated prompt's token ids, generating nothing."""
    return _rendered(_chat_prompt_ids(body, request.app.state.runtime))


def _rendered(prompt_ids: list[int]) -> dict:
    return {"token_ids": prompt_ids, "features": None}


@router.post("/completions", response_model=None)
async def create_completion(body: CompletionRequest, request: Request) -> Response:
    arrival_s = time.monotonic()
    runtime = request.app.state.runtime
    prompt_ids = _completion_prompt_ids(body, runtime)
    max_tokens = body.max_tokens if body.max_tokens is not None else DEFAULT_COMPLETION_MAX_TOKENS
    shape = ResponseShape(chat=False, model=runtime.adapter_for(body.model) or runtime.served_model_name,
                          include_usage=body.include_usage(),
                          continuous_usage=bool(body.stream_options and body.stream_options.continuous_usage_stats),
                          prompt_token_ids=prompt_ids if body.return_token_ids else None)
    if body.reasoning_tokens:
        raise APIError(400, "reasoning_tokens: reasoning streams in chat completions (delta.reasoning_content); "
                            "/v1/completions has no place for it", param="reasoning_tokens")
    if body.reasoning_effort is not None:
        raise APIError(400, "reasoning_effort: reasoning streams in chat completions (delta.reasoning_content); "
                            "/v1/completions has no place for it", param="reasoning_effort")
    return await _respond(request, runtime, shape, prompt_ids, _sampling_params(body, max_tokens), body, arrival_s)


@router.post("/chat/completions", response_model=None)
async def create_chat_completion(body: ChatCompletionRequest, request: Request) -> Response:
    arrival_s = time.monotonic()
    runtime = request.app.state.runtime
    prompt_ids = _chat_prompt_ids(body, runtime)
    max_tokens = body.token_limit()
    if max_tokens is None:   # as vLLM: whatever context is left after the prompt
        max_tokens = runtime.max_model_len - len(prompt_ids)
        if max_tokens < 1:
            raise APIError(400, f"messages: the prompt is {len(prompt_ids)} tokens, which leaves no room "
                                f"in the model's context of {runtime.max_model_len} tokens", param="messages")
    budget = runtime.reasoning_budget(body.reasoning_tokens, max_tokens, body.reasoning_effort)
    if budget > max_tokens:
        raise APIError(400, f"reasoning_tokens ({budget}) must not exceed max_tokens ({max_tokens})",
                       param="reasoning_tokens")
    shape = ResponseShape(chat=True, model=runtime.adapter_for(body.model) or runtime.served_model_name,
                          include_usage=body.include_usage(),
                          continuous_usage=bool(body.stream_options and body.stream_options.continuous_usage_stats),
                          prompt_token_ids=prompt_ids if body.return_token_ids else None,
                          reasoning=ReasoningSplit(budget) if runtime.reasons(body.reasoning_tokens,
                                                                              body.reasoning_effort) else None)
    params = _sampling_params(body, max_tokens)
    call = _planned_call(body, runtime)
    if call is not None:   # the reply is the call's text: exactly its bytes, as a model writes it, unless cut
        shape.tool_call = CallStream(call)
        params = replace(params, max_tokens=min(max_tokens, len(call.text.encode())), ignore_eos=True, min_tokens=0,
                         stop_token_ids=())
    return await _respond(request, runtime, shape, prompt_ids, params, body, arrival_s)


def _planned_call(body: ChatCompletionRequest, runtime):
    if not body.tools:
        return None
    choice = body.tool_choice or "auto"
    if isinstance(choice, NamedToolChoice):
        choice = choice.model_dump()
    try:
        return choose_call([tool.model_dump(exclude_none=True) for tool in body.tools], choice,
                           runtime.server_config.tool_call_rate, runtime.tool_rng)
    except ValueError as exc:
        raise APIError(400, str(exc), param="tool_choice") from None


def _adapter_card(runtime, name: str, source: str) -> dict:
    """A LoRA adapter as vLLM lists one: its parent is the base model, its root where it came from."""
    return {"id": name, "object": "model", "created": runtime.created, "owned_by": "servecap",
            "root": source, "parent": runtime.served_model_name, "max_model_len": runtime.max_model_len}


def _model_card(runtime) -> dict:
    return {"id": runtime.served_model_name, "object": "model", "created": runtime.created,
            "owned_by": "servecap", "max_model_len": runtime.max_model_len, "engine": runtime.describe()}


def _sampling_params(body: _SamplingRequest, max_tokens: int) -> SamplingParams:
    try:
        kv_transfer = kv_transfer_kind(body.kv_transfer_params)
    except ValueError as exc:
        raise APIError(400, str(exc), param="kv_transfer_params") from None
    try:
        return SamplingParams(
            kv_transfer=kv_transfer,
            max_tokens=max_tokens,
            temperature=1.0 if body.temperature is None else float(body.temperature),
            top_p=1.0 if body.top_p is None else float(body.top_p),
            seed=body.seed,
            ignore_eos=bool(body.ignore_eos),
            min_tokens=body.min_tokens or 0,
            stop_token_ids=tuple(body.stop_token_ids or ()),
        )
    except ValueError as exc:
        raise APIError(400, str(exc)) from None


async def _respond(request: Request, runtime, shape: ResponseShape, prompt_ids: list[int],
                   params: SamplingParams, body: _SamplingRequest, arrival_s: float) -> Response:
    stops = () if getattr(shape, "tool_call", None) is not None else body.stop_strings()   # a call is not cut
    output_text = OutputText(stops, skip_special_tokens=body.skips_special_tokens(),
                             keep_stop=body.keep_stop())
    headers = ignored_fields_headers(body)
    await runtime.fault_gate()   # an injected error burst or stall (reference_server.api.faults)
    split = runtime.engine.description.get("disaggregation")
    if params.kv_transfer == RECEIVE and split and split["role"] != "prefill":   # (else the engine refuses it)
        await read_remote_kv(body.kv_transfer_params)   # stale or unreachable: fails here, before any KV is taken
    generation = await Generation.open(runtime, shape.id, prompt_ids, params, output_text, arrival_s,
                                       lora=runtime.adapter_for(body.model))
    if body.stream:
        return StreamingResponse(_sse(generation, shape), media_type=SSE_MEDIA_TYPE,
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
                                 background=BackgroundTask(generation.close))
    try:
        collected = await _collect_unless_disconnected(request, generation)
    finally:
        generation.close()
    if collected is None:   # the client left; nobody reads this
        return Response(status_code=499)
    deltas, last, token_ids = collected
    answer = shape.full(deltas, last.finish_reason if last else None, last, len(prompt_ids), token_ids)
    if last is not None and last.kv_transfer_params is not None:   # a prefill for a decode worker: where to pull
        sent = last.kv_transfer_params
        answer["kv_transfer_params"] = {**sent, **runtime.kv_transfer_sent(sent["remote_request_id"])}
    return JSONResponse(answer, headers=headers)


async def _sse(generation: Generation, shape: ResponseShape):
    """The SSE body: a chunk per engine output, the usage chunk if asked, then [DONE]."""
    try:
        async for delta in generation.deltas():
            yield sse_event(shape.chunk(delta))
    except APIError as exc:   # headers are already sent: report in-band, as OpenAI does
        yield sse_event({"error": {"message": exc.message, "type": "server_error", "param": None,
                                   "code": exc.code}})
        return
    if shape.include_usage:
        yield sse_event(shape.usage_chunk(generation.prompt_tokens, generation.completion_tokens,
                                          generation.cached_prompt_tokens))
    yield DONE


async def _collect_unless_disconnected(request: Request, generation: Generation):
    """(text, last delta, generated ids), or None if the client disconnected first (the sequence is aborted)."""

    async def collect():
        parts, last, token_ids = [], None, []
        async for delta in generation.deltas():
            parts.append(delta)
            token_ids.extend(delta.token_ids)
            last = delta
        return parts, last, token_ids

    async def disconnected():
        while (await request.receive())["type"] != "http.disconnect":
            pass

    collect_task = asyncio.ensure_future(collect())
    watch_task = asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({collect_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        collect_task.cancel()
        raise
    finally:
        watch_task.cancel()
    if collect_task in done:
        return collect_task.result()
    collect_task.cancel()
    return None
