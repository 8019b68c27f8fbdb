"""The engine's step and request record: the recorder in the engine, the bounded ring, the routes.

A real tiny engine in this process (no server process), then the app on an engine thread with
FastAPI's TestClient: GET /v1/engine/steps?after=SEQ pages through what the engine did.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from reference_server.api import create_app
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from reference_server.runtime.engine_record_log import RecordRing
from engine_core.scheduling.sampling import SamplingParams
from contract.engine_record import REQUEST_FIELDS, STEP_FIELDS, StepRecord
from waiting import wait_until

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _step(i: int) -> StepRecord:
    return StepRecord(t_start=float(i), step_s=0.001, batch=1, prefill_tokens=0, decode_seqs=1, context_tokens=i,
                      running=1, waiting=0, kv_blocks_used=1, preempted=0, idle_after=False)


def test_the_ring_numbers_rows_pages_through_them_and_counts_what_it_dropped():
    ring = RecordRing(STEP_FIELDS, capacity=5)
    assert ring.after(0) == {"columns": ["seq", *STEP_FIELDS], "rows": [], "next": 0, "first": None, "last": 0,
                             "dropped": 0}
    ring.extend([_step(i) for i in range(3)])
    page = ring.after(0, limit=2)
    assert [row[0] for row in page["rows"]] == [1, 2] and page["next"] == 2 and page["dropped"] == 0
    assert page["rows"][1][1:] == [1.0, 0.001, 1, 0, 1, 1, 1, 0, 1, 0, False, 0, 0, 0, 0, 0, 0.0]
    assert [row[0] for row in ring.after(2)["rows"]] == [3]
    ring.extend([_step(i) for i in range(3, 9)])   # 9 rows into a ring of 5: rows 1-4 are gone
    behind = ring.after(1)
    assert [row[0] for row in behind["rows"]] == [5, 6, 7, 8, 9] and behind["dropped"] == 3 and behind["first"] == 5
    assert ring.after(9)["rows"] == [] and ring.after(9)["next"] == 9


def test_the_engine_records_every_step_and_each_finished_request_with_its_milestones():
    engine = Engine(EngineConfig.from_flags(model="tiny", max_model_len=128, max_num_seqs=4))
    engine.warmup()
    assert engine.stats().records == ((), ())   # the warm-up is not user traffic
    before = time.time()
    for i in range(3):
        engine.add_request(f"r{i}", [256, 10 + i, 20, 30], SamplingParams(max_tokens=5 + i, ignore_eos=True))
    engine.add_request("gone", [256, 1], SamplingParams(max_tokens=50, ignore_eos=True))
    engine.step()
    engine.abort_request("gone")
    while engine.has_unfinished_requests():
        engine.step()
    steps, requests = engine.stats().records
    assert len(steps) == engine.stats().total_steps
    assert steps[0].batch == 4 and steps[0].prefill_tokens == 3 * 4 + 2 and steps[0].decode_seqs == 0
    assert all(s.prefill_tokens == 0 and s.decode_seqs == s.batch for s in steps[1:])
    assert steps[-1].idle_after and not any(s.idle_after for s in steps[:-1])
    assert [r.response_id for r in requests] == ["r0", "r1", "r2"]   # finished ones, in finishing order; not "gone"
    for r in requests:
        assert before <= r.t_arrival <= r.t_scheduled < r.t_first_token < r.t_finish
        assert (r.prompt_tokens, r.finish_reason) == (4, "length")
    assert [r.output_tokens for r in requests] == [5, 6, 7]
    assert engine.stats().records == ((), ())   # taken once


def test_the_routes_page_through_the_record_of_a_live_app():
    app = create_app(build_engine=lambda: Engine(EngineConfig(model="tiny", max_model_len=64)))
    with TestClient(app) as client:
        wait_until(lambda: client.get("/ready").status_code == 200, timeout=60, what="/ready")
        # /ready waited for the app's own streamed warm-up request (api.warmup): a real request, recorded first
        warm = client.get("/v1/engine/requests").json()
        assert len(warm["rows"]) == 1 and warm["rows"][0][1].startswith("chatcmpl-")
        warm_steps = client.get("/v1/engine/steps").json()["last"]
        for _ in range(2):
            assert client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3, "ignore_eos": True}).status_code == 200
        body = client.get("/v1/engine/requests").json()
        assert body["columns"] == ["seq", *REQUEST_FIELDS] and len(body["rows"]) == 3
        assert all(row[1].startswith("cmpl-") for row in body["rows"][1:])
        steps = client.get("/v1/engine/steps", params={"after": 0, "limit": 2}).json()
        assert [row[0] for row in steps["rows"]] == [1, 2] and steps["next"] == 2
        rest = client.get("/v1/engine/steps", params={"after": steps["next"]}).json()
        assert rest["rows"] and rest["rows"][0][0] == 3 and rest["last"] == warm_steps + 6   # 3 steps per request
        bad = client.get("/v1/engine/steps", params={"after": -1})
        assert bad.status_code == 400 and "after" in bad.json()["error"]["message"]   # the API maps 422 to 400
