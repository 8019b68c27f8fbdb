"""The engine in its own spawned process (`EngineProcess`): the same contract as the engine
thread (accept/reject, stream, abort frees KV blocks), metrics from the child's stats, a
startup failure reported, and a child that dies failing its requests and the server (exit 1)."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import psutil
import pytest

from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import RequestRejected
from reference_server.runtime.engine_loop import ACCEPTED, EngineFailure
from reference_server.runtime.engine_process import EngineProcess
from reference_server.runtime.metrics import ServerMetrics
from engine_core.scheduling.sampling import SamplingParams
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec
from waiting import wait_until_async

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


async def drain(queue: asyncio.Queue) -> list:
    items = [await asyncio.wait_for(queue.get(), 30)]
    while not (isinstance(items[-1], Exception) or items[-1].finished):
        items.append(await asyncio.wait_for(queue.get(), 30))
    return items


def sample(metrics: ServerMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name)


def test_engine_process_streams_rejects_aborts_and_publishes_metrics():
    metrics = ServerMetrics()

    async def scenario():
        engine = EngineProcess(EngineConfig(model="tiny", max_model_len=64, num_threads=1), metrics=metrics,
                               cpus=(0,))
        engine.start()
        await asyncio.wait_for(engine.wait_ready(), 60)
        try:
            assert engine.pid != os.getpid() and engine.description["max_model_len"] == 64
            assert psutil.Process(engine.pid).cpu_affinity() == [0]
            assert sample(metrics, "servecap_kv_blocks_total") == engine.description["num_kv_blocks"]

            queue = engine.add_request("a", [256, 104, 105], SamplingParams(max_tokens=5, ignore_eos=True))
            assert await queue.get() == ACCEPTED
            outputs = await drain(queue)
            assert sum(len(o.new_token_ids) for o in outputs) == 5 and outputs[-1].finish_reason == "length"
            assert sample(metrics, "servecap_generation_tokens_total") >= 5

            rejected = engine.add_request("b", [1] * 60, SamplingParams(max_tokens=10))
            reason = await rejected.get()
            assert isinstance(reason, RequestRejected) and "64" in str(reason)

            long = engine.add_request("c", [256], SamplingParams(max_tokens=50, ignore_eos=True))
            assert await long.get() == ACCEPTED
            await long.get()   # running: it holds KV blocks
            assert sample(metrics, "servecap_kv_blocks_used") > 0
            engine.abort("c")
            await wait_until_async(lambda: sample(metrics, "servecap_kv_blocks_used") == 0,
                                   what="the aborted request freeing its KV blocks")
            assert sample(metrics, "servecap_requests_running") == 0
        finally:
            engine.stop()
        assert engine._process.exitcode == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("config, cpus, words", [
    (EngineConfig(model="no-such-model"), (), "model: .*no-such-model"),
    (EngineConfig(model="tiny"), (4096,), "--engine-cpus 4096: cannot run on those cores"),
])
def test_engine_process_reports_a_startup_failure(config, cpus, words):
    async def scenario():
        engine = EngineProcess(config, cpus=cpus)
        engine.start()
        try:
            with pytest.raises(RuntimeError, match="engine failed to start: " + words):
                await asyncio.wait_for(engine.wait_ready(), 60)
        finally:
            engine.stop()

    asyncio.run(scenario())


def test_a_dead_engine_process_fails_in_flight_requests():
    async def scenario():
        engine = EngineProcess(EngineConfig(model="tiny", max_model_len=2048, inject_step_delay_ms=20))
        engine.start()
        await asyncio.wait_for(engine.wait_ready(), 60)
        try:
            queue = engine.add_request("a", [256], SamplingParams(max_tokens=1000, ignore_eos=True))
            assert await queue.get() == ACCEPTED
            await queue.get()
            os.kill(engine.pid, signal.SIGKILL)
            items = await drain(queue)
            assert isinstance(items[-1], EngineFailure) and "exit code -9" in str(items[-1])
            assert not engine.ready.is_set() and "exited unexpectedly" in engine.failed
        finally:
            engine.stop()

    asyncio.run(scenario())


def test_server_exits_1_when_its_engine_process_dies():
    with ServerProcess(ReferenceServerSpec.from_flags(["--no-classifier"]), cwd=REPO) as server:
        engine = httpx.get(server.base_url + "/v1/engine").json()
        assert engine["server"]["engine_mode"] == "process"
        assert engine["engine_pid"] != server.pid
        assert engine["engine_pid"] in {child.pid for child in psutil.Process(server.pid).children()}
        os.kill(engine["engine_pid"], signal.SIGKILL)
        assert server.process.wait(timeout=30) == 1
        assert "engine process exited unexpectedly (exit code -9)" in server.output()
