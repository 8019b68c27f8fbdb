"""What the autoscaler reads from a replica: its /metrics, as the plan's metrics mean them.

    in_flight  requests it holds: running + waiting (vLLM's num_requests_running + num_requests_waiting)
    waiting    requests queued in its engine, not yet scheduled
    kv_usage   the share of its KV cache in use, in [0, 1]
and, for the run's prefix-cache hit rate, its counters since it started:
    prefix_hits     prompt tokens found in its prefix cache
    prefix_queries  prompt tokens it looked up
and, for the router's resilience, the attempts it answered with a fault set on purpose:
    injected_errors the reference server's servecap_requests_rejected_total{reason="injected_fault"} (0 elsewhere)

The names are `contract.server_metrics`' for the engine the page shows (the reference server, vLLM,
SGLang, ...); the reference server's KV share is its used blocks over its total.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from contract.server_metrics import detect_engine, metric_for

INJECTED_METRIC = "servecap_requests_rejected_total"


def replica_load(text: str) -> dict[str, float]:
    """{in_flight, waiting, kv_usage, prefix_hits, prefix_queries} from a /metrics page; a value the page
    lacks is 0."""
    values: dict[str, float] = {}
    injected = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
            if sample.name == INJECTED_METRIC and sample.labels.get("reason") == "injected_fault":
                injected += float(sample.value)
    engine = detect_engine(values)

    def read(field: str) -> float | None:
        metric = metric_for(field, engine)
        return None if metric is None else values.get(metric.name)

    running, waiting = read("requests_running") or 0.0, read("requests_waiting") or 0.0
    kv = read("kv_usage")
    if kv is None:
        used, total = read("kv_blocks_used"), read("kv_blocks_total")
        kv = used / total if used is not None and total else 0.0
    return {"in_flight": running + waiting, "waiting": waiting, "kv_usage": kv,
            "prefix_hits": read("prefix_cache_hits") or 0.0, "prefix_queries": read("prefix_cache_queries") or 0.0,
            "injected_errors": injected}
