"""Server-Sent Events framing, as OpenAI streams: `data: <json>\\n\\n` ... `data: [DONE]\\n\\n`."""

from __future__ import annotations

import json

SSE_MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def sse_event(payload: dict) -> bytes:
    """One SSE `data:` event carrying compact JSON (JSON never contains a raw newline)."""
    return b"data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"
