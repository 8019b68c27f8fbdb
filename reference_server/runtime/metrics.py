"""Prometheus metrics of the serving process, one registry per app.

Every metric lives in the `ServerMetrics` object's own `CollectorRegistry`, never in
prometheus-client's global one, so tests can build many apps in one process. Names are
prefixed `servecap_` (see DESIGN.md); counters get prometheus-client's `_total` suffix.

Who writes what:
- the engine side (`observe_step`, on the engine thread or on the reader thread of the
  engine process's pipe): running/waiting gauges, KV blocks, batch size, tokens per step,
  step time, generated tokens, prefix-cache hits, preemptions;
- the event loop: prompt tokens, time to first token, end-to-end latency, finish
  reasons, rejections (by reason), and the classifier's batches (also under Triton's names,
  `triton_metrics`); and, from a finished
  request's engine-side timings (`observe_request`), its queue, prefill, decode and
  inference times, named after vLLM's (docs/server_metrics.md defines each).
prometheus-client metrics are thread-safe, so both sides write directly.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

from reference_server.runtime.triton_metrics import TritonMetrics

# batch sizes are small integers: power-of-two edges keep `le` labels readable
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
ITERATION_TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
# latencies from sub-millisecond (tiny model, CPU) to a minute (long generations under load)
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 30.0, 60.0,
)
STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

# a finished request's phases (RequestTimings fields `<phase>_s`), named after vLLM's request_<phase>_time_seconds
REQUEST_PHASES = {
    "queue": "Engine received the request -> first scheduled.",
    "prefill": "First scheduled -> first token.",
    "decode": "First token -> last token.",
    "inference": "First scheduled -> last token.",
}

# reasons used with `requests_rejected` (one label value per reason)
REJECT_QUEUE_FULL = "queue_full"      # 429: --max-waiting reached
REJECT_DRAINING = "draining"          # 503: SIGTERM received, not admitting
REJECT_INVALID = "invalid"            # 400/404/405/413/422: bad input, unknown model or route
REJECT_UNAUTHORIZED = "unauthorized"  # 401: missing or wrong API key
REJECT_INJECTED = "injected_fault"    # any status: a fault set on purpose (--fault, POST /admin/faults)


class ServerMetrics:
    """All `servecap_*` metrics of one app, registered in `self.registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # engine state, refreshed after every engine step
        self.requests_running = Gauge(
            "servecap_requests_running", "Sequences the engine is running (in the batch).", registry=r)
        self.requests_waiting = Gauge(
            "servecap_requests_waiting", "Sequences queued in the engine's scheduler, not yet running.",
            registry=r)
        self.kv_blocks_used = Gauge(
            "servecap_kv_blocks_used", "KV-cache blocks held by sequences.", registry=r)
        self.kv_blocks_total = Gauge(
            "servecap_kv_blocks_total", "KV-cache blocks allocated at startup.", registry=r)
        self.kv_block_bytes = Gauge(
            "servecap_kv_block_bytes", "Bytes of one KV-cache block (all layers, K and V).", registry=r)
        self.batch_size = Histogram(
            "servecap_batch_size", "Sequences per engine step that did work.",
            buckets=BATCH_SIZE_BUCKETS, registry=r)
        self.iteration_tokens = Histogram(
            "servecap_iteration_tokens", "Tokens computed per engine step that did work (prefill and decode).",
            buckets=ITERATION_TOKEN_BUCKETS, registry=r)
        self.step_seconds = Histogram(
            "servecap_engine_step_seconds", "Wall time of one engine step (schedule, forward, postprocess).",
            buckets=STEP_BUCKETS, registry=r)
        self.generation_tokens = Counter(
            "servecap_generation_tokens", "Tokens generated.", registry=r)
        self.prompt_tokens = Counter(
            "servecap_prompt_tokens", "Prompt tokens of admitted requests.", registry=r)
        self.prefix_cache_hits = Counter(
            "servecap_prefix_cache_hits", "Prompt tokens served from the prefix cache.", registry=r)
        self.prefix_cache_queries = Counter(
            "servecap_prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", registry=r)
        self.preemptions = Counter(
            "servecap_preemptions", "Sequences preempted to free KV blocks.", registry=r)
        # speculative decoding, vLLM's spec_decode counters under our prefix
        self.spec_drafts = Counter(
            "servecap_spec_decode_num_drafts", "Verification steps of a sequence's proposals.", registry=r)
        self.spec_draft_tokens = Counter(
            "servecap_spec_decode_num_draft_tokens", "Proposed tokens verified.", registry=r)
        self.spec_accepted_tokens = Counter(
            "servecap_spec_decode_num_accepted_tokens", "Proposed tokens accepted.", registry=r)
        self.spec_accepted_per_position = Counter(
            "servecap_spec_decode_num_accepted_tokens_per_pos", "Proposed tokens accepted, by position (0 first).",
            ["position"], registry=r)
        # request lifecycle, from the HTTP side
        self.time_to_first_token = Histogram(
            "servecap_time_to_first_token_seconds", "Request arrival to first generated token.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.e2e_latency = Histogram(
            "servecap_e2e_request_latency_seconds", "Request arrival to last token.",
            buckets=LATENCY_BUCKETS, registry=r)
        # a finished request's phases on the engine's clock: servecap_request_{phase}_time_seconds
        self.request_phase_seconds = {
            phase: Histogram(f"servecap_request_{phase}_time_seconds", text, buckets=LATENCY_BUCKETS, registry=r)
            for phase, text in REQUEST_PHASES.items()}
        self.requests_finished = Counter(
            "servecap_requests_finished", "Generations finished, by finish reason.",
            ["finish_reason"], registry=r)
        self.requests_rejected = Counter(
            "servecap_requests_rejected", "Requests answered with an error, by reason.",
            ["reason"], registry=r)
        self.requests_admission_waiting = Gauge(
            "servecap_requests_admission_waiting",
            "Admitted generation requests without a first token yet (what --max-waiting limits).",
            registry=r)
        # classifier (KServe V2 path)
        self.classifier_batch_size = Histogram(
            "servecap_classifier_batch_size", "Rows per classifier forward pass.",
            buckets=BATCH_SIZE_BUCKETS, registry=r)
        self.classifier_queue_seconds = Histogram(
            "servecap_classifier_queue_seconds", "Time a classifier request waited for its batch.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.classifier_requests = Counter(
            "servecap_classifier_requests", "Classifier inference requests served.", registry=r)
        self.triton = TritonMetrics()   # the classifier's queue and compute time, under Triton's names
        r.register(self.triton)
        # LoRA adapters: vLLM's lora_requests_info under our prefix, and per adapter from the engine's records
        self.lora_requests_info = Gauge(
            "servecap_lora_requests_info", "Running and waiting LoRA adapters (comma-separated) and the slots; "
            "the value is the time of the update, as vLLM's.",
            ["running_lora_adapters", "waiting_lora_adapters", "max_lora"], registry=r)
        self.lora_requests = Counter(
            "servecap_lora_requests", "Finished requests, by LoRA adapter.", ["lora_name"], registry=r)
        self.lora_slot_wait_seconds = Histogram(
            "servecap_lora_slot_wait_seconds", "Queue time a request was passed over because its adapter had no "
            "free slot, by adapter.", ["lora_name"], buckets=LATENCY_BUCKETS, registry=r)
        self.lora_loads = Counter(
            "servecap_lora_loads", "Adapters copied from host memory into a slot (cold adapters).", registry=r)
        self.lora_load_seconds = Counter(
            "servecap_lora_load_seconds", "Time spent copying adapters into slots, inside steps.", registry=r)
        self.engine_info = Info(
            "servecap_engine", "Engine configuration (strategy, model, dtype, device).", registry=r)
        # previous cumulative engine counters, so observe_step can add deltas
        self._last_prefix_hits = 0
        self._last_prefix_queries = 0
        self._last_preemptions = 0
        self._last_spec = (0, 0, 0)
        self._last_spec_positions: tuple[int, ...] = ()
        self._max_loras: int | None = None
        self._lora_labels: tuple[str, str] | None = None

    def set_engine_description(self, description: dict) -> None:
        """Static engine facts, once the engine is built (`engine.describe()`)."""
        self.kv_blocks_total.set(description.get("num_kv_blocks", 0))
        self.kv_block_bytes.set(description.get("kv_block_bytes", 0))
        lora = description.get("lora")
        self._max_loras = lora["max_loras"] if isinstance(lora, dict) else None
        self.engine_info.info({
            key: str(description[key])
            for key in ("model", "strategy", "dtype", "device", "block_size", "max_model_len")
            if key in description
        })

    def observe_step(self, stats, num_new_tokens: int, did_work: bool) -> None:
        """Called after each engine step with `engine.stats()` (from the engine thread or process)."""
        self.requests_running.set(stats.num_running)
        self.requests_waiting.set(stats.num_waiting)
        self.kv_blocks_used.set(stats.kv_blocks_used)
        self.kv_blocks_total.set(stats.kv_blocks_total)
        if did_work:
            self.batch_size.observe(stats.last_batch_size)
            self.iteration_tokens.observe(stats.last_num_tokens)
            self.step_seconds.observe(stats.last_step_s)
        if num_new_tokens:
            self.generation_tokens.inc(num_new_tokens)
        self._last_prefix_hits = _add_delta(
            self.prefix_cache_hits, stats.total_prefix_cache_hit_tokens, self._last_prefix_hits)
        self._last_prefix_queries = _add_delta(
            self.prefix_cache_queries, stats.total_prefix_cache_queries, self._last_prefix_queries)
        self._last_preemptions = _add_delta(
            self.preemptions, stats.total_preemptions, self._last_preemptions)
        spec = (stats.spec_drafts, stats.spec_draft_tokens, stats.spec_accepted_tokens)
        if spec != self._last_spec:
            self._last_spec = tuple(_add_delta(counter, now, last) for counter, now, last in zip(
                (self.spec_drafts, self.spec_draft_tokens, self.spec_accepted_tokens), spec, self._last_spec))
            before = self._last_spec_positions or (0,) * len(stats.spec_accepted_per_position)
            self._last_spec_positions = tuple(
                _add_delta(self.spec_accepted_per_position.labels(position=str(i)), now, last)
                for i, (now, last) in enumerate(zip(stats.spec_accepted_per_position, before)))

        if self._max_loras is not None:
            self._observe_lora(stats)

    def _observe_lora(self, stats) -> None:
        labels = (",".join(stats.lora_running), ",".join(stats.lora_waiting))
        if labels != self._lora_labels:   # one series at a time, as vLLM keeps it
            if self._lora_labels is not None:
                self.lora_requests_info.remove(*self._lora_labels, str(self._max_loras))
            self._lora_labels = labels
            self.lora_requests_info.labels(*labels, str(self._max_loras)).set_to_current_time()
        for record in stats.records.requests:
            if record.lora:
                self.lora_requests.labels(lora_name=record.lora).inc()
                self.lora_slot_wait_seconds.labels(lora_name=record.lora).observe(record.lora_wait_s)
        for step in stats.records.steps:
            if step.lora_loads:
                self.lora_loads.inc(step.lora_loads)
                self.lora_load_seconds.inc(step.lora_load_s)

    def observe_request(self, timings) -> None:
        """A finished request's `RequestTimings` (None: it never reached a first token)."""
        if timings is None:
            return
        for phase, histogram in self.request_phase_seconds.items():
            histogram.observe(getattr(timings, f"{phase}_s"))

    def reject(self, reason: str) -> None:
        self.requests_rejected.labels(reason=reason).inc()

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the Prometheus text exposition."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _add_delta(counter: Counter, cumulative: int, previous: int) -> int:
    """Mirror an engine's cumulative count into a Prometheus counter; returns the new mark."""
    if cumulative > previous:
        counter.inc(cumulative - previous)
    return max(cumulative, previous)
