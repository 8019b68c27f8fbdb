"""What an external --url target says about itself, and nothing it does not.

    GET /v1/models  -> the served model id, `max_model_len` (vLLM, SGLang), `root` (vLLM: the checkpoint)
    GET /metrics    -> the engine (contract.server_metrics.detect_engine) and its KV cache:
                       vLLM `vllm:cache_config_info` labels (block_size, num_gpu_blocks, cache_dtype,
                       kv_cache_memory_bytes); SGLang `sglang:max_total_num_tokens` (KV capacity, tokens)
    GET /info       -> TGI: model_id, model_dtype, max_total_tokens, max_batch_total_tokens
    GET /list_workers -> vLLM's router (`vllm-router`): the workers it routes to. The sweep then reads no
                       /metrics or step record through it: the router would forward each poll to a worker
                       as it forwards a request, moving its round robin and mixing the workers' records

Whatever is not told stays None (run.json writes "unknown" for the strategy and dtype): the
sweep never fills in a preset's or the reference server's defaults for someone else's engine.
The parsers are pure; `describe_external` does the three GETs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import requests
from prometheus_client.parser import text_string_to_metric_families

from contract.server_metrics import detect_engine, metric_for

UNKNOWN = "unknown"


@dataclass
class ExternalEngine:
    engine: str | None = None               # "vllm" | "sglang" | "tgi" | "llamacpp" | "servecap" | None
    model: str | None = None                # the served model id
    model_root: str | None = None           # vLLM's `root`: the checkpoint it loaded
    max_model_len: int | None = None
    dtype: str | None = None                # the model's dtype, where the engine says (TGI)
    block_size: int | None = None           # KV block (page) size, tokens
    kv_blocks: int | None = None            # KV blocks the engine allocated
    kv_cache_dtype: str | None = None       # as the engine says it ("auto": the model's dtype)
    kv_cache_memory_bytes: int | None = None
    kv_capacity_tokens: int | None = None   # tokens the KV cache holds
    router_workers: tuple[str, ...] | None = None   # a vllm-router's workers (None: not a router)
    notes: tuple[str, ...] = ()


def _int(value) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number > 0 else None


def from_models(body: object, engine: ExternalEngine) -> None:
    """Fill the model id, max_model_len and root from a /v1/models body (its first model)."""
    try:
        card = body["data"][0]
    except (TypeError, KeyError, IndexError):
        return
    if not isinstance(card, dict):
        return
    engine.model = card.get("id") if isinstance(card.get("id"), str) else engine.model
    engine.max_model_len = _int(card.get("max_model_len")) or engine.max_model_len
    engine.model_root = card.get("root") if isinstance(card.get("root"), str) else None


def from_metrics(text: str, engine: ExternalEngine) -> None:
    """The engine's kind and KV cache from one /metrics scrape."""
    families = list(text_string_to_metric_families(text))
    samples = [sample for family in families for sample in family.samples]
    engine.engine = detect_engine(sample.name for sample in samples)
    info = metric_for("cache_config", engine.engine)
    if info is not None:
        labels = next((s.labels for s in samples if s.name == info.name), None)
        if labels:
            engine.block_size = _int(labels.get("block_size"))
            engine.kv_blocks = _int(labels.get("num_gpu_blocks"))
            engine.kv_cache_dtype = labels.get("cache_dtype") or None
            engine.kv_cache_memory_bytes = _int(labels.get("kv_cache_memory_bytes"))
            engine.kv_capacity_tokens = _int(labels.get("kv_cache_size_tokens"))
    if engine.engine == "sglang":
        total = next((s.value for s in samples if s.name == "sglang:max_total_num_tokens"), None)
        engine.kv_capacity_tokens = _int(total)


def from_tgi_info(body: object, engine: ExternalEngine) -> None:
    """TGI's GET /info: the model and its dtype, the longest request and the batch's token budget."""
    if not isinstance(body, dict):
        return
    engine.model = body.get("model_id") if isinstance(body.get("model_id"), str) else engine.model
    engine.dtype = body.get("model_dtype") if isinstance(body.get("model_dtype"), str) else engine.dtype
    engine.max_model_len = _int(body.get("max_total_tokens")) or engine.max_model_len
    engine.kv_capacity_tokens = _int(body.get("max_batch_total_tokens")) or engine.kv_capacity_tokens


def from_router_workers(body: object, engine: ExternalEngine) -> None:
    """vllm-router's GET /list_workers: {"urls": [...]}; anything else says nothing."""
    if isinstance(body, dict) and isinstance(body.get("urls"), list):
        engine.router_workers = tuple(str(url) for url in body["urls"])


def is_router(url: str, timeout_s: float = 10.0) -> bool:
    """Whether `url` is a vllm-router (it answers GET /list_workers with its workers)."""
    engine = ExternalEngine()
    try:
        response = requests.get(url + "/list_workers", timeout=timeout_s)
        if response.ok:
            from_router_workers(response.json(), engine)
    except (requests.RequestException, ValueError):
        return False
    return engine.router_workers is not None


def describe_external(url: str, timeout_s: float = 10.0) -> ExternalEngine:
    """GET what the target tells (each GET may fail: that part stays unknown, with a note)."""
    engine, notes = ExternalEngine(), []
    for path, parse, as_json in (("/v1/models", from_models, True), ("/metrics", from_metrics, False)):
        try:
            response = requests.get(url + path, timeout=timeout_s)
            response.raise_for_status()
            parse(response.json() if as_json else response.text, engine)
        except (requests.RequestException, ValueError) as exc:
            notes.append(f"GET {path} failed ({type(exc).__name__}: {str(exc)[:120]}); what it tells is unknown")
    if engine.engine == "tgi":
        try:
            from_tgi_info(requests.get(url + "/info", timeout=timeout_s).json(), engine)
        except (requests.RequestException, ValueError):
            notes.append("GET /info failed on a TGI target; its dtype and token budget are unknown")
    engine.notes = tuple(notes)
    return engine
