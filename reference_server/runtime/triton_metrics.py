"""The classifier's request, queue and compute time under Triton's own metric names.

Triton's names are what a KServe/Triton dashboard and Model Analyzer already read, so the
reference server exposes exactly them (`nv_inference_*`, counters without the `_total` suffix
prometheus-client would add), labelled by model and version:

- nv_inference_request_success / nv_inference_request_failure{reason}: requests;
- nv_inference_count: inferences (rows), nv_inference_exec_count: batch executions;
- nv_inference_request_duration_us: arrival to response, per request, cumulative;
- nv_inference_queue_duration_us: time in the queue before its batch launched;
- nv_inference_compute_{input,infer,output}_duration_us: its batch's input, forward pass and
  output time, charged to each request of the batch, as Triton charges it.

A request's queue plus compute is its time in the server apart from the protocol's parsing
and writing, which the difference to the request duration holds.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from prometheus_client.core import Metric

from reference_server.classifier.batcher import BatchTiming

VERSION = "1"
DURATIONS = {
    "nv_inference_request_duration_us": "Cumulative inference request duration in microseconds",
    "nv_inference_queue_duration_us": "Cumulative inference queuing duration in microseconds",
    "nv_inference_compute_input_duration_us": "Cumulative compute input duration in microseconds",
    "nv_inference_compute_infer_duration_us": "Cumulative compute inference duration in microseconds",
    "nv_inference_compute_output_duration_us": "Cumulative inference compute output duration in microseconds",
}
COUNTS = {
    "nv_inference_request_success": "Number of successful inference requests, all batch sizes",
    "nv_inference_count": "Number of inferences performed (a batch of N rows counts N)",
    "nv_inference_exec_count": "Number of model executions performed (batches)",
}
FAILURE = "nv_inference_request_failure"


class TritonMetrics:
    """Cumulative counters by model; a prometheus-client collector (register it in a registry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._failures: dict[tuple[str, str], int] = defaultdict(int)

    def success(self, model: str, timing: BatchTiming, request_s: float) -> None:
        with self._lock:
            values = self._values[model]
            values["nv_inference_request_success"] += 1
            values["nv_inference_request_duration_us"] += request_s * 1e6
            values["nv_inference_queue_duration_us"] += timing.queue_s * 1e6
            values["nv_inference_compute_input_duration_us"] += timing.compute_input_s * 1e6
            values["nv_inference_compute_infer_duration_us"] += timing.compute_infer_s * 1e6
            values["nv_inference_compute_output_duration_us"] += timing.compute_output_s * 1e6

    def batch(self, model: str, rows: int) -> None:
        with self._lock:
            self._values[model]["nv_inference_count"] += rows
            self._values[model]["nv_inference_exec_count"] += 1

    def failure(self, model: str, reason: str) -> None:
        with self._lock:
            self._failures[(model, reason)] += 1

    def collect(self):
        with self._lock:
            values = {model: dict(v) for model, v in self._values.items()}
            failures = dict(self._failures)
        for name, text in {**COUNTS, **DURATIONS}.items():
            metric = Metric(name, text, "counter")
            for model, by_name in values.items():
                metric.add_sample(name, {"model": model, "version": VERSION}, float(round(by_name.get(name, 0.0))))
            yield metric
        metric = Metric(FAILURE, "Number of failed inference requests, all batch sizes", "counter")
        for (model, reason), count in failures.items():
            metric.add_sample(FAILURE, {"model": model, "reason": reason, "version": VERSION}, float(count))
        yield metric
