"""Request fields this server does not know are ignored, as vLLM ignores them, and said so.

vLLM's request models allow fields they do not know (and only log them), so routers and
clients add their own: vllm-router adds SGLang's `separate_reasoning`, `stream_reasoning`,
`return_hidden_states`... to every request, and LiteLLM or LangChain send provider extras.
Refusing them would make the server unusable behind such a router; ignoring them silently
would hide a parameter the client thinks it set. So each response names what was ignored:
- the `x-servecap-ignored-fields` response header, streamed or not: the names sorted and
  comma-separated, each percent-encoded (a name may hold any character, a comma included)
  and cut to `MAX_NAME_CHARS`; after `MAX_NAMES_IN_HEADER` names, `+N more`;
- the server log: one warning per name, the first time a process sees it (a router sends
  the same names with every request; one line each is enough to notice them).
Nested names are dotted paths without list positions: `stream_options.x`,
`messages.reasoning_content`, `messages.content.cache_control`.
Fields the server knows are typed strictly whatever else the request holds (`openai_schemas.py`).
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from pydantic import BaseModel

HEADER = "x-servecap-ignored-fields"
MAX_NAMES_IN_HEADER = 32
MAX_NAME_CHARS = 64
MAX_WARNED_NAMES = 256   # a bound on the memory a stream of made-up names can take

logger = logging.getLogger("reference_server.api")


def ignored_fields(request: BaseModel) -> list[str]:
    """The request's unknown field names, nested ones as dotted paths; sorted, each once."""
    found: set[str] = set()
    _collect(request, "", found)
    return sorted(found)


def _collect(model: BaseModel, prefix: str, found: set[str]) -> None:
    found.update(prefix + name for name in (model.model_extra or {}))
    for name in type(model).model_fields:
        value = getattr(model, name)
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, BaseModel):
                _collect(item, f"{prefix}{name}.", found)


def header_value(names: list[str]) -> str:
    shown = [quote(name[:MAX_NAME_CHARS], safe="") for name in names[:MAX_NAMES_IN_HEADER]]
    if len(names) > MAX_NAMES_IN_HEADER:
        shown.append(f"+{len(names) - MAX_NAMES_IN_HEADER} more")
    return ",".join(shown)


class WarnOnce:
    """Logs one warning per ignored name per process, for at most `limit` distinct names."""

    def __init__(self, limit: int = MAX_WARNED_NAMES) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._full = False

    def warn(self, names: list[str]) -> None:
        for name in names:
            if name in self._seen or self._full:
                continue
            if len(self._seen) >= self.limit:
                self._full = True
                logger.warning("request fields: %d distinct unknown names ignored so far; new ones are no longer "
                               "logged (each response still names them in its %s header)", self.limit, HEADER)
                return
            self._seen.add(name)
            logger.warning("request field %r is not used by this server and is ignored (named in the %s response "
                           "header; logged once)", name[:MAX_NAME_CHARS], HEADER)


_warn_once = WarnOnce()


def ignored_fields_headers(request: BaseModel) -> dict[str, str]:
    """{HEADER: names} for a request with unknown fields (each warned about once), else {}."""
    names = ignored_fields(request)
    if not names:
        return {}
    _warn_once.warn(names)
    return {HEADER: header_value(names)}
