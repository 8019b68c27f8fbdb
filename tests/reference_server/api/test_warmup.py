"""/ready means the whole path is warm: the first request after it streams like the ones after it.

Before issue 17 the first streamed chat request after /ready paid 90-140 ms of first-use work
(on a quiet 2-core VM; 200-340 ms on a loaded one) and could arrive in one burst: the serving
process imported the engine's model code to unpickle the first step's message, and libraries
imported their streaming code on first use. Now the server sends itself a streamed request
before /ready turns 200 (`reference_server.api.warmup`), and the pipe's records come from a
torch-free module.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx
import pytest

from contract.engine_record import REQUESTS_ROUTE, STEPS_ROUTE
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

pytestmark = pytest.mark.slow

STEP_DELAY_MS = 5.0   # each engine step busy-waits this long: 48 tokens take at least 47 x 5 ms to stream
MAX_TOKENS = 48
# How much slower than the requests after it the first may be. A warm first request differs
# from its successors only by scheduling noise, which can triple one short TTFB on a busy
# machine; the absolute floor covers references that happened to land on an idle moment.
# An unwarmed server exceeds both: 90+ ms against ~10 ms references.
TTFB_RATIO = 3.0
TTFB_FLOOR_S = 0.050


@dataclass(frozen=True)
class Streamed:
    """One streamed request as the client saw it."""

    response_id: str   # the engine's request id (its record in /v1/engine/requests)
    sent_at: float     # unix s the client began sending it (this machine's clock, as the engine's records)
    ttfb_s: float      # to the first token's chunk
    spread_s: float    # first -> last token's chunk


def streamed_chat(client: httpx.Client) -> Streamed:
    """Send one streamed chat request and read it to the end (a chunk per token: some carry no text,
    a byte that ends no UTF-8 character)."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": MAX_TOKENS,
            "stream": True, "ignore_eos": True}
    sent_at, start = time.time(), time.perf_counter()
    arrivals = []
    response_id = ""
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk["choices"]:
                    arrivals.append(time.perf_counter() - start)
                    response_id = chunk["id"]
    assert len(arrivals) == MAX_TOKENS
    return Streamed(response_id, sent_at, arrivals[0], arrivals[-1] - arrivals[0])


# a TTFB cut at the engine's own timestamps: (name, what it covers)
TTFB_PARTS = (("to the engine", "client send -> the serving process hands it to the engine (HTTP, validation)"),
              ("to its first step", "-> the engine step that first ran it began (pipe, engine loop wake-up)"),
              ("first step", "that step's wall time (prefill and the injected delay)"),
              ("back to the client", "-> its first token's chunk read here (pipe, event loop, SSE, client)"),
              ("client TTFB", "the sum, as timed here"),
              ("median step", "the engine's steps while the request ran"))


def ttfb_parts(streamed: Streamed, record: dict, steps: list[dict]) -> tuple[float, ...]:
    """`record`: the request's row of /v1/engine/requests; `steps`: the rows of /v1/engine/steps
    (dicts by column); seconds, in the order of TTFB_PARTS."""
    own = [step["step_s"] for step in steps if record["t_scheduled"] <= step["t_start"] < record["t_finish"]]
    return (record["t_arrival"] - streamed.sent_at, record["t_scheduled"] - record["t_arrival"],
            record["t_first_token"] - record["t_scheduled"],
            streamed.sent_at + streamed.ttfb_s - record["t_first_token"], streamed.ttfb_s, statistics.median(own))


def where_the_time_went(first: Streamed, later: list[Streamed], requests: dict, steps: dict) -> str:
    """The first request's TTFB beside the next ones' (their median), part by part, from the server's
    own record (GET /v1/engine/requests and /steps): a failure says whether the client, the front
    end or the engine paid."""
    records = {row[1]: dict(zip(requests["columns"], row)) for row in requests["rows"]}
    missing = [s.response_id for s in (first, *later) if s.response_id not in records]
    if missing:
        return f"(no engine record for {missing}; the server recorded {sorted(records)})"
    step_rows = [dict(zip(steps["columns"], row)) for row in steps["rows"]]
    first_parts = ttfb_parts(first, records[first.response_id], step_rows)
    later_parts = [ttfb_parts(s, records[s.response_id], step_rows) for s in later]
    lines = [f"{'ms':20s} {'first':>7s} {'next':>7s}"]
    for index, (name, meaning) in enumerate(TTFB_PARTS):
        reference = statistics.median(parts[index] for parts in later_parts)
        lines.append(f"{name:20s} {first_parts[index] * 1e3:7.1f} {reference * 1e3:7.1f}   {meaning}")
    return "\n".join(lines)


@pytest.fixture
def frozen_heap():
    """This process's heap out of the collector's reach while the test times requests, unfrozen after.
    TTFB is timed here, and after the suite's imports and earlier tests the heap is many times this
    module's own: a full collection of it, due whenever the earlier tests left it due, pauses one
    request, and on the first it reads as a slow first request."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def fresh_server():
    """One torch thread: the tiny model gains nothing from a second, and two sharing 2 cores with this
    process, the serving process and whatever else runs wait for each other at every op's barrier, so
    a prefill step takes anything from its usual time to many times it: the first request's TTFB,
    one draw, then loses to the median of three."""
    spec = ReferenceServerSpec.from_flags(["--model", "tiny", "--no-classifier", "--num-threads", "1",
                                           "--inject-step-delay-ms", str(STEP_DELAY_MS)])
    with ServerProcess(spec) as server:
        yield server


def test_first_request_after_ready_streams_like_the_next(frozen_heap, fresh_server):
    with httpx.Client(base_url=fresh_server.base_url, timeout=60, trust_env=False) as client:
        assert client.get("/ready").status_code == 200   # the ready line came after the warm-up
        first = streamed_chat(client)
        later = [streamed_chat(client) for _ in range(3)]
        metrics = client.get("/metrics").text
        engine_requests, engine_steps = client.get(REQUESTS_ROUTE).json(), client.get(STEPS_ROUTE).json()
    # streamed: the tokens came one step apart, not in one burst at the end
    assert first.spread_s >= 0.5 * (MAX_TOKENS - 1) * STEP_DELAY_MS / 1e3
    reference = statistics.median(s.ttfb_s for s in later)
    assert first.ttfb_s <= max(TTFB_RATIO * reference, TTFB_FLOOR_S), (
        f"first TTFB {first.ttfb_s * 1e3:.1f} ms against {reference * 1e3:.1f} ms for the next requests; "
        f"where the time went:\n{where_the_time_went(first, later, engine_requests, engine_steps)}")
    # the warm-up request is counted like any other: 4 requests here plus that one
    assert 'servecap_requests_finished_total{finish_reason="length"} 5.0' in metrics


def test_the_engine_pipe_records_unpickle_without_torch():
    """What crosses the engine process's pipe is defined torch-free, so the serving process never
    imports model code to read the first step (that import was the first request's cost)."""
    program = (
        "import sys, pickle\n"
        "sys.modules['torch'] = None\n"   # any import of torch now fails
        "from reference_server.engine.outputs import EngineStats, RequestRejected, StepOutput\n"
        "items = [('r', StepOutput('r', [1], True, 'length', 3, 1, 0)), ('s', RequestRejected('too long'))]\n"
        "stats = EngineStats(0, 0, 0, 8, 1, 0.1, 0.1, 0, 0, 0, 1)\n"
        "pickle.loads(pickle.dumps(('items', items, stats, 1, True)))\n"
        "assert 'reference_server.engine.engine' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_a_serving_process_without_a_classifier_never_imports_torch():
    """Torch belongs to the engine process and the classifier: without a classifier the serving
    process builds its app torch-free, so its start-up heap (and the collection that walks it) stays
    small and it starts a second or so sooner."""
    program = (
        "import sys\n"
        "sys.modules['torch'] = None\n"   # any import of torch now fails
        "from reference_server.cli import build_parser, configs_from_args\n"
        "configs = configs_from_args(build_parser().parse_args(['--model', 'tiny', '--no-classifier']))\n"
        "from reference_server.api.server import run_server\n"
        "from reference_server.api.app import create_app\n"
        "create_app(*configs)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
