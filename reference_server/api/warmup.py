"""Warm the whole HTTP path before /ready says 200: the app sends itself one streamed chat request.

`Engine.warmup()` runs one forward pass, but a request also crosses code the engine never
sees: uvicorn's protocol, routing and validation, admission, the engine pipe, the SSE
stream, and what libraries import on first use (anyio's streams, for one). So once the
engine is ready, `warm_http_path` sends one streamed `POST /v1/chat/completions` (sampled,
with usage) over the server's own listening socket, or into the app in-process (ASGI) when
it has none (an app under a test client), reads it to `[DONE]`, and only then sets
`runtime.http_warm`, which `/ready` waits for. A warm-up that fails is the server's failure
(`runtime.warmup_error`): it would fail a user's request the same way.

The warm-up is a real request: it shows in /metrics like any other (one request of
WARMUP_MAX_TOKENS tokens), and its own seed leaves the engine's sampling generator untouched.

A serving process of its own (one with a listening socket) then collects and freezes its heap
before /ready turns 200 (`freeze_startup_heap`); an app under a test client leaves the test's
process alone.

Measured on tiny (issue 17): without it, the first streamed request after /ready took 90-340 ms
to its first token against 5-40 ms for the next ones; most of that was the serving process
importing the engine's model code to unpickle the first step's message (fixed at the cause:
`engine.outputs` is torch-free), the rest first-use imports in the streaming path.
"""

from __future__ import annotations

import gc
import json
import logging

import httpx

logger = logging.getLogger("reference_server.api.warmup")

WARMUP_MAX_TOKENS = 4      # a prefill step, then decode steps
WARMUP_PROMPT = "hi"       # 6 prompt tokens with the chat template
WARMUP_TIMEOUT_S = 600.0   # a big model on a CPU: four tokens can take a while


class WarmupFailed(RuntimeError):
    """The warm-up request did not stream to its end."""


def warmup_body(model: str, max_model_len: int) -> dict:
    """A short sampled chat request that fits any usable context (a context too short for it is
    too short for any chat request: the warm-up says so, as a 400 would)."""
    max_tokens = max(1, min(WARMUP_MAX_TOKENS, max_model_len - 2 - (2 + len(WARMUP_PROMPT))))
    return {"model": model, "messages": [{"role": "user", "content": WARMUP_PROMPT}],
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True, "seed": 0}


async def warm_http_path(app, runtime) -> None:
    """Once the engine is ready: one streamed request through the app; then /ready may say 200."""
    try:
        await runtime.engine.wait_ready()
    except RuntimeError:
        return   # the engine failed to start: /ready already says so
    headers = {"Authorization": f"Bearer {runtime.server_config.api_key}"} if runtime.server_config.api_key else {}
    if runtime.listening is not None:
        host, port = runtime.listening
        client = httpx.AsyncClient(base_url=f"http://{_url_host(host)}:{port}", trust_env=False,
                                   timeout=WARMUP_TIMEOUT_S, headers=headers)
    else:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                   timeout=WARMUP_TIMEOUT_S, headers=headers)
    try:
        async with client:
            chunks = await stream_once(client, warmup_body(runtime.served_model_name, runtime.max_model_len))
    except (httpx.HTTPError, WarmupFailed) as exc:
        runtime.warmup_error = f"HTTP warm-up request failed: {type(exc).__name__}: {exc}"
        logger.error(runtime.warmup_error)
        return
    logger.info("HTTP path warm: %d chunks streamed", chunks)
    if runtime.listening is not None:   # the process is the server's own (api.server), not a test's
        freeze_startup_heap()
    runtime.http_warm = True


def freeze_startup_heap() -> None:
    """Collect, then move every object alive now (imports, the app, what the warm-up used first) out
    of the collector's reach, so a later full collection walks only what serving made. Left to
    itself, start-up's last full collection (a pause of the whole heap's size) falls wherever the
    allocation counts put it: inside the warm-up, or on the first request after /ready."""
    gc.collect()
    gc.freeze()


async def stream_once(client: httpx.AsyncClient, body: dict) -> int:
    """POST a streamed chat completion and read it to `[DONE]`; the number of data chunks before it."""
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise WarmupFailed(f"status {response.status_code}: {(await response.aread())[:200]!r}")
        chunks = 0
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                return chunks
            if "error" in json.loads(line[len("data: "):]):
                raise WarmupFailed(f"the stream carried an error: {line[:200]}")
            chunks += 1
    raise WarmupFailed("the stream ended before data: [DONE]")


def _url_host(host: str) -> str:
    """Where a client on this machine reaches a socket bound to `host` (the wildcards: loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]" if ":" in host else host
