"""In-process: the classifier's dynamic batcher, the classifier, the engine thread, the CLI."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from reference_server.runtime.engine_thread import ACCEPTED, AsyncEngine, EngineFailure
from reference_server.classifier.model import ClassifierConfig, TabularClassifier
from reference_server.classifier.batcher import DynamicBatcher
from reference_server.cli import build_parser, configs_from_args, main
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine, RequestRejected
from engine_core.scheduling.sampling import SamplingParams
from waiting import wait_until, wait_until_async


# --- dynamic batcher ------------------------------------------------------------------------
class RecordingModel:
    """[B, F] -> [B, 1] holding each row's first feature, so routing mistakes show."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        self.batches.append(rows.shape[0])
        return rows[:, :1].copy()


async def run_requests(batcher: DynamicBatcher, sizes: list[int], gap_s: float = 0.0) -> list[np.ndarray]:
    batcher.start()
    try:
        tasks = []
        start = 0
        for n in sizes:
            rows = np.arange(start, start + n, dtype=np.float32).reshape(n, 1).repeat(2, axis=1)
            tasks.append(asyncio.create_task(batcher.infer(rows)))
            start += n
            await asyncio.sleep(gap_s)  # pacing arrivals; 0 still yields, so each request queues in order
        return [probs for probs, _timing in await asyncio.gather(*tasks)]
    finally:
        await batcher.stop()


def test_batcher_launches_preferred_sizes_and_routes_results_back():
    model = RecordingModel()
    batcher = DynamicBatcher(model, max_batch_size=8, preferred_batch_sizes=(4,), max_queue_delay_s=10.0)
    results = asyncio.run(run_requests(batcher, [1] * 8))
    assert model.batches == [4, 4]   # never waits the 10 s delay: the preferred size is reached
    assert [r.ravel().tolist() for r in results] == [[float(i)] for i in range(8)]


def test_batcher_launches_a_partial_batch_after_the_queue_delay():
    model = RecordingModel()
    batcher = DynamicBatcher(model, max_batch_size=8, preferred_batch_sizes=(8,), max_queue_delay_s=0.05)
    start = time.monotonic()
    results = asyncio.run(run_requests(batcher, [2, 1]))
    assert model.batches == [3]
    assert time.monotonic() - start >= 0.05
    assert results[0].ravel().tolist() == [0.0, 1.0] and results[1].ravel().tolist() == [2.0]


def test_batcher_takes_whole_requests_up_to_the_launch_size():
    model = RecordingModel()
    batcher = DynamicBatcher(model, max_batch_size=4, max_queue_delay_s=0.05)
    results = asyncio.run(run_requests(batcher, [3, 3, 2]))
    # 3 + 3 would pass max_batch_size: requests are never split, so each launches on its own
    assert model.batches == [3, 3, 2]
    assert [r.ravel().tolist() for r in results] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0]]


def test_batcher_with_batching_off_runs_each_request_alone():
    model = RecordingModel()
    batcher = DynamicBatcher(model, max_batch_size=8, preferred_batch_sizes=(4,), max_queue_delay_s=10.0,
                             dynamic_batching=False)
    results = asyncio.run(run_requests(batcher, [1, 2, 1, 3]))
    assert model.batches == [1, 2, 1, 3]
    assert [r.ravel().tolist() for r in results] == [[0.0], [1.0, 2.0], [3.0], [4.0, 5.0, 6.0]]


class SlowModel(RecordingModel):
    """Holds each forward pass 0.2 s and notes how many ran at once."""

    def __init__(self) -> None:
        super().__init__()
        self.running = self.most_at_once = 0
        self.lock = threading.Lock()

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return super().__call__(rows)


@pytest.mark.parametrize("instances, most_at_once", [(1, 1), (2, 2)])
def test_batcher_instances_run_batches_in_parallel(instances, most_at_once):
    model = SlowModel()
    batcher = DynamicBatcher(model, max_batch_size=1, instances=instances)
    start = time.monotonic()
    results = asyncio.run(run_requests(batcher, [1, 1, 1, 1]))
    assert model.most_at_once == most_at_once
    assert time.monotonic() - start >= 0.2 * 4 / instances
    assert [r.ravel().tolist() for r in results] == [[0.0], [1.0], [2.0], [3.0]]


def test_batcher_times_queue_and_compute_per_request_as_triton_charges_them():
    model = SlowModel()
    batches = []
    batcher = DynamicBatcher(model, max_batch_size=2, max_queue_delay_s=10.0,
                             on_batch=lambda rows, timings: batches.append((rows, timings)))

    async def two_batches():
        batcher.start()
        try:
            rows = np.ones((1, 2), np.float32)
            return await asyncio.gather(*(batcher.infer(rows) for _ in range(4)))
        finally:
            await batcher.stop()

    timings = [timing for _probs, timing in asyncio.run(two_batches())]
    assert [rows for rows, _ in batches] == [2, 2]
    assert [t.batch_rows for t in timings] == [2, 2, 2, 2]
    # each request of a batch is charged the whole forward pass; the second batch queued behind the first
    assert all(0.2 <= t.compute_infer_s < 0.4 for t in timings)
    assert max(t.queue_s for t in timings[:2]) < 0.1 and min(t.queue_s for t in timings[2:]) >= 0.2
    assert batches[0][1] == timings[:2] and batches[1][1] == timings[2:]


def test_batched_predictions_equal_unbatched_on_a_seeded_set():
    """The validation exercise's quality check: the classifier's labels batched (as the dynamic
    batcher forms batches: 1 to 32 rows) against each row alone, on a seeded set. The labels are
    identical; the probabilities are not bit for bit (a batch takes other matmul kernels): they
    differ in the last float32 bits, held here under 1e-6."""
    model = TabularClassifier.from_config(ClassifierConfig(seed=0))
    rows = np.random.default_rng(0).normal(size=(256, 16)).astype(np.float32)
    alone = np.concatenate([model.predict(rows[i:i + 1]) for i in range(len(rows))])
    for size in (2, 7, 32):
        batched = np.concatenate([model.predict(rows[i:i + size]) for i in range(0, len(rows), size)])
        np.testing.assert_array_equal(batched.argmax(axis=1), alone.argmax(axis=1))
        np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-6)


def test_batcher_rejects_requests_larger_than_max_batch_size():
    batcher = DynamicBatcher(RecordingModel(), max_batch_size=2)

    async def oversized():
        await batcher.infer(np.zeros((3, 2), np.float32))

    with pytest.raises(ValueError, match="1..2 rows"):
        asyncio.run(oversized())


def test_classifier_is_deterministic_per_seed_and_returns_probabilities():
    rows = np.random.default_rng(1).normal(size=(5, 16)).astype(np.float32)
    a = TabularClassifier.from_config(ClassifierConfig(seed=3)).predict(rows)
    b = TabularClassifier.from_config(ClassifierConfig(seed=3)).predict(rows)
    c = TabularClassifier.from_config(ClassifierConfig(seed=4)).predict(rows)
    assert a.shape == (5, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("fields, words", [
    ({"num_classes": 1}, "num_classes"), ({"preferred_batch_sizes": (64,)}, "preferred_batch_sizes"),
    ({"name": "a/b"}, "name"), ({"max_queue_delay_us": -1}, "max_queue_delay_us"),
])
def test_classifier_config_names_the_bad_field(fields, words):
    with pytest.raises(ValueError, match=words):
        ClassifierConfig(**fields)


# --- engine thread --------------------------------------------------------------------------
def test_engine_thread_streams_outputs_rejects_and_aborts():
    async def scenario():
        engine_thread = AsyncEngine(lambda: Engine(EngineConfig(model="tiny", max_model_len=64)))
        engine_thread.start()
        await engine_thread.wait_ready()
        try:
            queue = engine_thread.add_request("a", [256, 104, 105], SamplingParams(max_tokens=5, ignore_eos=True))
            assert await queue.get() == ACCEPTED
            outputs = [await queue.get()]
            while not outputs[-1].finished:
                outputs.append(await queue.get())
            assert sum(len(o.new_token_ids) for o in outputs) == 5 and outputs[-1].finish_reason == "length"

            rejected = engine_thread.add_request("b", [1] * 60, SamplingParams(max_tokens=10))
            assert isinstance(await rejected.get(), RequestRejected)

            long = engine_thread.add_request("c", [256], SamplingParams(max_tokens=50, ignore_eos=True))
            assert await long.get() == ACCEPTED
            await long.get()   # running
            engine_thread.abort("c")
            await wait_until_async(lambda: not engine_thread.engine.has_unfinished_requests(),
                                   what="the engine dropping the aborted request")
        finally:
            engine_thread.stop()

    asyncio.run(scenario())


class EngineFailingOnce(Engine):
    """The real engine, except that its first step after warm-up raises (an engine bug, injected)."""

    armed = failed = False

    def warmup(self):
        super().warmup()
        self.armed = True

    def step(self):
        if self.armed and not self.failed:
            self.failed = True
            raise RuntimeError("injected step failure")
        return super().step()


def test_engine_thread_survives_a_failing_step():
    async def scenario():
        engine_thread = AsyncEngine(lambda: EngineFailingOnce(EngineConfig(model="tiny", max_model_len=64)))
        engine_thread.start()
        await engine_thread.wait_ready()
        try:
            first = engine_thread.add_request("a", [256, 1], SamplingParams(max_tokens=3, ignore_eos=True))
            assert await first.get() == ACCEPTED
            failure = await first.get()
            assert isinstance(failure, EngineFailure) and "injected step failure" in str(failure)
            assert not engine_thread.engine.has_unfinished_requests()   # its sequence was dropped
            second = engine_thread.add_request("b", [256, 1], SamplingParams(max_tokens=3, ignore_eos=True))
            assert await second.get() == ACCEPTED
            output = await second.get()
            while not output.finished:
                output = await second.get()
            assert output.num_output_tokens == 3
        finally:
            engine_thread.stop()

    asyncio.run(scenario())


class CountingEngine(Engine):
    """The real engine, counting step() calls (to show the thread sleeps instead of polling)."""

    step_calls = 0

    def step(self):
        self.step_calls += 1
        return super().step()


def test_engine_thread_sleeps_until_a_static_batch_may_launch():
    config = EngineConfig.from_flags(model="tiny", max_model_len=64, strategy="static", batch_size=4,
                                    batch_timeout_ms=300)

    async def scenario():
        engine_thread = AsyncEngine(lambda: CountingEngine(config))
        engine_thread.start()
        await engine_thread.wait_ready()
        try:
            calls_before = engine_thread.engine.step_calls
            start = time.monotonic()
            queue = engine_thread.add_request("lonely", [256, 1], SamplingParams(max_tokens=3, ignore_eos=True))
            assert await queue.get() == ACCEPTED
            output = await queue.get()
            waited = time.monotonic() - start
            while not output.finished:
                output = await queue.get()
            # one request never fills the batch of 4: it launches when the 300 ms batch timeout ends,
            # and the thread slept through the wait instead of calling step() in a loop
            assert waited >= 0.3
            assert engine_thread.engine.step_calls - calls_before <= 3 + 2
        finally:
            engine_thread.stop()

    asyncio.run(scenario())


def test_ready_is_503_until_the_engine_is_built_and_warm():
    from fastapi.testclient import TestClient

    from reference_server.api import create_app

    release = threading.Event()

    def slow_engine():
        release.wait(30)   # "loading weights" until the test lets go
        return Engine(EngineConfig(model="tiny", max_model_len=64))

    with TestClient(create_app(build_engine=slow_engine)) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/ready").json() == {"status": "loading"}
        loading = client.post("/v1/completions", json={"prompt": "x"})
        assert loading.status_code == 503 and loading.json()["error"]["code"] == "not_ready"
        release.set()
        wait_until(lambda: client.get("/ready").status_code == 200, timeout=30, what="/ready answering 200")
        assert client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 200


# --- CLI ------------------------------------------------------------------------------------
def test_flags_map_onto_the_configs():
    args = build_parser().parse_args([
        "--strategy", "dynamic", "--max-batch-size", "8", "--preferred-batch-sizes", "4,8",
        "--kv-memory-gib", "0.5", "--max-waiting", "3", "--api-key", "k", "--classifier-preferred-batch-sizes", "2"])
    engine, server, classifier = configs_from_args(args)
    assert engine.strategy == "dynamic" and engine.limits.preferred_batch_sizes == (4, 8)
    assert engine.kv_memory_bytes == 1 << 29
    assert server.max_waiting == 3 and server.api_key == "k" and server.host == "127.0.0.1"
    assert classifier.preferred_batch_sizes == (2,)


@pytest.mark.parametrize("argv, words", [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--strategy", "fastest"], "strategy must be one of"),
    (["--preferred-batch-sizes", "4,x"], "comma-separated integers"),
    (["--max-batch-size", "2", "--preferred-batch-sizes", "4"], "exceeds max_batch_size"),
    (["--port", "70000"], "port must be in"),
    (["--max-body-bytes", "10"], "max_body_bytes"),
])
def test_bad_flags_exit_2_with_a_message(argv, words, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_a_taken_port_exits_1_with_a_message(capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


# --- listening socket -------------------------------------------------------------------------
def test_accepted_connections_have_nagle_disabled():
    """Nagle on a streaming server holds each response's first small writes until the client's
    delayed ACK (40 ms): the listening socket must say TCP, so accepted sockets get TCP_NODELAY."""
    import socket

    from reference_server.api.server import bind_socket

    listener = bind_socket("127.0.0.1", 0)
    client = socket.create_connection(listener.getsockname()[:2])
    try:
        accepted, _ = listener.accept()
        assert listener.proto == socket.IPPROTO_TCP and accepted.proto == socket.IPPROTO_TCP
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        accepted.close()
    finally:
        client.close()
        listener.close()
