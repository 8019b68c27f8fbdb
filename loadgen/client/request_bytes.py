"""Request bodies and whole HTTP/1.1 requests as bytes, built before the send timestamp.

The send path does nothing between taking `t_start` and the socket write, so every
request is rendered to its final bytes here first. Pure: no sockets, no gevent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from loadgen.workload.prompts import Prompt

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True)
class Target:
    """Where requests go, parsed once from `--host`."""

    scheme: str
    host: str
    port: int
    base_path: str  # e.g. "" or "/proxy" (no trailing slash)

    @classmethod
    def from_url(cls, url: str) -> "Target":
        if not url:
            raise ValueError("host: no target URL; pass --host http://HOST:PORT")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"host: {url!r} is not an http(s)://HOST[:PORT] URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"host: {url!r} has an invalid port") from None
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


def chat_body(model: str, prompt: Prompt, max_tokens: int, *, stream: bool, ignore_eos: bool,
              reasoning_tokens: int | None = None) -> dict:
    messages = []
    if prompt.system:
        messages.append({"role": "system", "content": prompt.system})
    messages.append({"role": "user", "content": prompt.user})
    return chat_messages_body(model, messages, max_tokens, stream=stream, ignore_eos=ignore_eos,
                              reasoning_tokens=reasoning_tokens)


def chat_messages_body(model: str, messages: list[dict], max_tokens: int, *, stream: bool, ignore_eos: bool,
                       reasoning_tokens: int | None = None, tools: list[dict] | None = None,
                       tool_choice: str | None = None) -> dict:
    """A chat request of whole messages ([{"role", "content"}], e.g. a dataset's conversation so far).
    `reasoning_tokens`: of max_tokens, the reasoning budget (the reference server's extension; a server
    without it ignores the field, as vLLM does an unknown one). `tools` and `tool_choice`: OpenAI's."""
    body: dict = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
    if reasoning_tokens is not None:
        body["reasoning_tokens"] = reasoning_tokens
    if tools:
        body["tools"] = tools
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
    return _finish_body(body, stream=stream, ignore_eos=ignore_eos)


def completions_body(model: str, prompt: Prompt, max_tokens: int, *, stream: bool, ignore_eos: bool,
                     reasoning_tokens: int | None = None) -> dict:
    """`reasoning_tokens`: refused by ChatConfig for completions; taken here only so both bodies share a shape."""
    body: dict = {"model": model, "prompt": prompt.completion_text, "max_tokens": max_tokens, "stream": stream}
    return _finish_body(body, stream=stream, ignore_eos=ignore_eos)


def _finish_body(body: dict, *, stream: bool, ignore_eos: bool) -> dict:
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM/SGLang/reference server extension; fixes output length
    return body


def http_request(
    method: str,
    target: Target,
    path: str,
    body: dict | bytes | None = None,
    *,
    api_key: str | None = None,
    accept: str = "application/json",
    headers: dict[str, str] | None = None,
) -> bytes:
    """A complete HTTP/1.1 request (keep-alive, identity encoding) as bytes; `headers`: more of them,
    names and values as given (the caller keeps them to visible ASCII: no line break can reach the wire)."""
    if isinstance(body, dict):
        payload = json.dumps(body, separators=(",", ":")).encode()
    else:
        payload = body or b""
    lines = [
        f"{method} {target.base_path}{path} HTTP/1.1",
        f"Host: {target.host_header}",
        "User-Agent: servecap-loadgen",
        f"Accept: {accept}",
        "Accept-Encoding: identity",  # no gzip: chunks must reach us as the server wrote them
        "Connection: keep-alive",
    ]
    if api_key:
        lines.append(f"Authorization: Bearer {api_key}")
    for name, value in (headers or {}).items():
        if not (name.isascii() and value.isascii() and name.isprintable() and value.isprintable()):
            raise ValueError(f"header {name!r}: {value!r} is not visible ASCII")
        lines.append(f"{name}: {value}")
    if payload or method in ("POST", "PUT"):
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def session_header_value(key: str) -> str:
    """A session key as a header value: the key itself when it is visible ASCII (a trace's ids, the load
    generator's own), else a stable hex digest of it, so any key routes by itself and none breaks a line."""
    if key.isascii() and key.isprintable() and key.strip() == key:
        return key
    return "sha1-" + hashlib.sha1(key.encode()).hexdigest()
