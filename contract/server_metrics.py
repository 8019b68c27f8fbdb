"""server_metrics.csv: which engine's /metrics it holds, what each name means, how rows are kept.

The one mapping table from serving engines' Prometheus names to servecap's server fields
(docs/server_metrics.md prints it). The scraper keeps only the families named here; the report
reads every field through it; the engine is told by the names /metrics exposes.

File format (t, name, labels, value): `name` is the sample name as exposed (a histogram gives
`_bucket`/`_sum`/`_count` rows), `labels` is `k="v",...` sorted by key. A scrape writes only the
samples whose value changed since the previous scrape of the same server, plus one `SCRAPE_MARKER`
row (value: samples seen); each server's scraper starts with a full snapshot (a sweep over several
strategies appends one scraper per server). A reader reconstructs any series at a scrape time as its
last row at or before that time (carry forward; 0 before its first row). Files written before this
format (every sample every scrape, no marker) read the same way: each row is a change.

Pure: no pandas, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SCRAPE_MARKER = "servecap:scrape"   # one row per scrape; `value` = samples the scrape saw

GAUGE, COUNTER, HISTOGRAM, INFO = "gauge", "counter", "histogram", "info"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class Metric:
    """One engine's metric for a field. `name` is the sample name (a counter's with its `_total`
    as exposed), or a histogram's stem; values are multiplied by `scale` (e.g. percent -> fraction).
    `buckets`: a histogram whose percentiles are read (else only its mean: _sum and _count are kept)."""

    name: str
    kind: str
    scale: float = 1.0
    buckets: bool = True

    def sample_names(self) -> tuple[str, ...]:
        if self.kind != HISTOGRAM:
            return (self.name,)
        return tuple(self.name + s for s in (HISTOGRAM_SUFFIXES if self.buckets else HISTOGRAM_SUFFIXES[1:]))


def _g(name: str, scale: float = 1.0) -> Metric:
    return Metric(name, GAUGE, scale)


def _c(name: str) -> Metric:
    return Metric(name, COUNTER)


def _h(name: str) -> Metric:
    return Metric(name, HISTOGRAM)


def _mean(name: str) -> Metric:
    return Metric(name, HISTOGRAM, buckets=False)


# engine -> the prefix every one of its names carries (how the engine is detected)
ENGINE_PREFIXES = {"servecap": "servecap_", "vllm": "vllm:", "sglang": "sglang:", "tgi": "tgi_",
                   "llamacpp": "llamacpp:"}

# field -> {engine: Metric}. Gauges: window mean; counters: window delta; histograms: window
# mean (from _sum/_count deltas) and, for the LATENCY_FIELDS, p50/p90/p99 from bucket deltas
# (the others keep no buckets: under load every cumulative bucket changes every scrape).
MAPPING: dict[str, dict[str, Metric]] = {
    "requests_running": {"servecap": _g("servecap_requests_running"), "vllm": _g("vllm:num_requests_running"),
                         "sglang": _g("sglang:num_running_reqs"), "tgi": _g("tgi_batch_current_size"),
                         "llamacpp": _g("llamacpp:requests_processing")},
    "requests_waiting": {"servecap": _g("servecap_requests_waiting"), "vllm": _g("vllm:num_requests_waiting"),
                         "sglang": _g("sglang:num_queue_reqs"), "tgi": _g("tgi_queue_size"),
                         "llamacpp": _g("llamacpp:requests_deferred")},
    "kv_usage": {"vllm": _g("vllm:kv_cache_usage_perc"), "sglang": _g("sglang:token_usage"),
                 "llamacpp": _g("llamacpp:kv_cache_usage_ratio")},   # servecap: kv_blocks_used / kv_blocks_total
    "kv_blocks_used": {"servecap": _g("servecap_kv_blocks_used")},
    "kv_blocks_total": {"servecap": _g("servecap_kv_blocks_total")},
    "kv_block_bytes": {"servecap": _g("servecap_kv_block_bytes")},
    "preemptions": {"servecap": _c("servecap_preemptions_total"), "vllm": _c("vllm:num_preemptions_total"),
                    "sglang": _c("sglang:num_retracted_requests_total")},
    "prefix_cache_hits": {"servecap": _c("servecap_prefix_cache_hits_total"),
                          "vllm": _c("vllm:prefix_cache_hits_total"), "sglang": _c("sglang:cached_tokens_total")},
    "prefix_cache_queries": {"servecap": _c("servecap_prefix_cache_queries_total"),
                             "vllm": _c("vllm:prefix_cache_queries_total"), "sglang": _c("sglang:prompt_tokens_total")},
    "spec_drafts": {"servecap": _c("servecap_spec_decode_num_drafts_total"),
                    "vllm": _c("vllm:spec_decode_num_drafts_total")},
    "spec_draft_tokens": {"servecap": _c("servecap_spec_decode_num_draft_tokens_total"),
                          "vllm": _c("vllm:spec_decode_num_draft_tokens_total")},
    "spec_accepted_tokens": {"servecap": _c("servecap_spec_decode_num_accepted_tokens_total"),
                             "vllm": _c("vllm:spec_decode_num_accepted_tokens_total")},
    "generation_tokens": {"servecap": _c("servecap_generation_tokens_total"),
                          "vllm": _c("vllm:generation_tokens_total"), "sglang": _c("sglang:generation_tokens_total"),
                          "llamacpp": _c("llamacpp:tokens_predicted_total")},
    "tokens_per_step": {"servecap": _mean("servecap_iteration_tokens"), "vllm": _mean("vllm:iteration_tokens_total")},
    "batch_size": {"servecap": _mean("servecap_batch_size"), "tgi": _mean("tgi_batch_next_size")},
    "step_time": {"servecap": _mean("servecap_engine_step_seconds"), "tgi": _mean("tgi_batch_inference_duration")},
    # per-request latencies (seconds), as each engine defines them (docs/server_metrics.md)
    "ttft_s": {"servecap": _h("servecap_time_to_first_token_seconds"), "vllm": _h("vllm:time_to_first_token_seconds"),
               "sglang": _h("sglang:time_to_first_token_seconds")},
    "queue_s": {"servecap": _h("servecap_request_queue_time_seconds"), "vllm": _h("vllm:request_queue_time_seconds"),
                "sglang": _h("sglang:queue_time_seconds"), "tgi": _h("tgi_request_queue_duration")},
    "prefill_s": {"servecap": _h("servecap_request_prefill_time_seconds"),
                  "vllm": _h("vllm:request_prefill_time_seconds")},
    "decode_s": {"servecap": _h("servecap_request_decode_time_seconds"),
                 "vllm": _h("vllm:request_decode_time_seconds")},
    "inference_s": {"servecap": _h("servecap_request_inference_time_seconds"),
                    "vllm": _h("vllm:request_inference_time_seconds"), "tgi": _h("tgi_request_inference_duration")},
    "e2e_s": {"servecap": _h("servecap_e2e_request_latency_seconds"), "vllm": _h("vllm:e2e_request_latency_seconds"),
              "sglang": _h("sglang:e2e_request_latency_seconds"), "tgi": _h("tgi_request_duration")},
    # the engine's own description (labels of a gauge set to 1): read once by the sweep
    "cache_config": {"vllm": Metric("vllm:cache_config_info", INFO)},
}
LATENCY_FIELDS = ("ttft_s", "queue_s", "prefill_s", "decode_s", "inference_s", "e2e_s")
# Not read (so not scraped): per-token histograms (vLLM's inter_token_latency, time_per_output_token):
# the client measures those itself, and their buckets would double the file under load.


def detect_engine(names: Iterable[str]) -> str | None:
    """The engine whose running-requests gauge (else most names) appears among `names`; None if no
    known engine's names do. servecap wins ties: the reference server is the one we know best."""
    names = set(names)
    counts = {engine: sum(1 for n in names if n.startswith(prefix)) for engine, prefix in ENGINE_PREFIXES.items()}
    for engine in ENGINE_PREFIXES:
        running = MAPPING["requests_running"].get(engine)
        if running is not None and running.name in names:
            return engine
    best = max(counts, key=lambda engine: counts[engine])
    return best if counts[best] else None


def metric_for(field: str, engine: str | None) -> Metric | None:
    return MAPPING.get(field, {}).get(engine) if engine else None


# KServe V2 servers' request split, under Triton's names (Triton, and the reference server's classifier):
# cumulative counters labelled by model and version, read as window deltas (reports.classic)
TRITON_COUNTERS = ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                   "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                   "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                   "nv_inference_compute_output_duration_us")


def kept_sample_names() -> frozenset[str]:
    """Every sample name some field of some engine reads: what the scraper keeps."""
    return frozenset([*(name for per_engine in MAPPING.values() for metric in per_engine.values()
                        for name in metric.sample_names()), *TRITON_COUNTERS])


def mapping_rows() -> list[dict[str, str]]:
    """The mapping as table rows ({"field", engine: "name (kind)"}), for the docs and their test."""
    rows = []
    for field, per_engine in MAPPING.items():
        row = {"field": field}
        for engine in ENGINE_PREFIXES:
            metric = per_engine.get(engine)
            if metric is None:
                row[engine] = ""
                continue
            kind = metric.kind if metric.buckets else "histogram, mean only"
            row[engine] = f"`{metric.name}` ({kind})"
        rows.append(row)
    return rows
