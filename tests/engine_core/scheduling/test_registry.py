"""The strategy registry: each strategy owns its limits, and a fifth one is one file plus one line.

The toy `lockstep` strategy (tests/toy_strategy.py) is registered here and then run by the
in-process engine, a real server subprocess (`GET /v1/engine`, a completion), the simulator,
the sweep's config check and the report's running-sequences prediction, none of which knows it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

import toy_strategy
from engine_core.scheduling.strategies import (BUILT_IN, PLUGIN_ENV, STRATEGIES, Strategy, get_strategy,
                                                    limits_from_flags, register, resolve, strategy_names,
                                                    unregister)
from engine_core.scheduling.strategies.continuous import ContinuousLimits
from engine_core.scheduling.strategies.dynamic import DynamicLimits
from engine_core.scheduling.strategies.flags import add_limit_arguments, limits_from_args
from engine_core.scheduling.strategies.none import NoBatchingLimits, NoBatchingScheduler
from engine_core.scheduling.strategies.static import StaticBatchScheduler, StaticLimits

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def lockstep():
    """The toy strategy, registered for one test and removed after it."""
    register(toy_strategy.STRATEGY)
    yield toy_strategy.STRATEGY
    unregister("lockstep")


# -- the built-in strategies ----------------------------------------------------------------
def test_the_four_built_ins_in_order_each_describing_todays_keys():
    assert strategy_names()[:4] == BUILT_IN == ("none", "static", "dynamic", "continuous")
    described = {name: STRATEGIES[name].limits().describe() for name in BUILT_IN}
    assert described == {
        "none": {},
        "static": {"batch_size": 8, "batch_timeout_ms": 50.0},
        "dynamic": {"max_batch_size": 8, "preferred_batch_sizes": [], "max_queue_delay_us": 1000},
        "continuous": {"max_num_seqs": 32, "max_num_batched_tokens": 2048, "max_prefill_tokens_with_decodes": 256,
                       "chunked_prefill": True, "capacity_policy": "max-utilization"},
    }
    assert [STRATEGIES[name].limits().max_running for name in BUILT_IN] == [1, 8, 8, 32]


def test_names_resolve_to_limits_and_back():
    assert get_strategy(" Static ").scheduler is StaticBatchScheduler
    assert resolve(None, None) == ("continuous", ContinuousLimits())
    assert resolve("none", None) == ("none", NoBatchingLimits())
    assert resolve(None, StaticLimits(batch_size=3)) == ("static", StaticLimits(batch_size=3))
    with pytest.raises(ValueError, match="belongs to strategy 'static', not 'dynamic'"):
        resolve("dynamic", StaticLimits())
    with pytest.raises(ValueError, match="strategy must be one of none, static, dynamic, continuous"):
        get_strategy("fastest")


def test_flat_flags_of_other_strategies_are_validated_then_ignored():
    assert limits_from_flags("static", {"batch_size": 4, "max_num_seqs": 2}) == StaticLimits(batch_size=4)
    with pytest.raises(ValueError, match="max_num_seqs must be a positive integer"):
        limits_from_flags("static", {"max_num_seqs": 0})   # wrong for continuous, so wrong everywhere
    with pytest.raises(ValueError, match="unknown batching limit\\(s\\) batch_sizes"):
        limits_from_flags("static", {"batch_sizes": 4})
    dynamic = limits_from_flags("dynamic", {"preferred_batch_sizes": [8, 4, 8]})   # run.json has lists
    assert dynamic == DynamicLimits(preferred_batch_sizes=(4, 8)) and dynamic.describe()["preferred_batch_sizes"] == [4, 8]


@pytest.mark.parametrize("limits, words", [
    (lambda: StaticLimits(batch_size=0), "batch_size must be a positive integer"),
    (lambda: StaticLimits(batch_timeout_ms=-1), "batch_timeout_ms must be a non-negative number"),
    (lambda: DynamicLimits(max_queue_delay_us=1.5), "max_queue_delay_us must be a non-negative integer"),
    (lambda: DynamicLimits(preferred_batch_sizes=4), "preferred_batch_sizes must be a list"),
    (lambda: DynamicLimits(max_batch_size=2, preferred_batch_sizes=(4,)), "entry 4 exceeds max_batch_size"),
    (lambda: ContinuousLimits(max_num_batched_tokens=0), "max_num_batched_tokens must be a positive integer"),
])
def test_bad_limits_name_the_field(limits, words):
    with pytest.raises(ValueError, match=words):
        limits()


def test_register_refuses_what_would_confuse_the_registry(lockstep):
    register(lockstep)   # the same spec again: a no-op
    assert strategy_names()[-1] == "lockstep"
    with pytest.raises(ValueError, match="'lockstep' is already registered"):
        register(Strategy("lockstep", NoBatchingLimits, NoBatchingScheduler))
    with pytest.raises(ValueError, match="already belongs to another strategy"):
        register(Strategy("other", StaticLimits, StaticBatchScheduler))
    with pytest.raises(ValueError, match="lower case"):
        register(Strategy("Big", toy_strategy.LockstepLimits, toy_strategy.LockstepScheduler))
    with pytest.raises(TypeError, match="scheduler must be a Scheduler class"):
        register(Strategy("odd", NoBatchingLimits, object))


def test_every_limit_becomes_a_flag_with_its_default_in_the_help():
    parser = argparse.ArgumentParser()
    add_limit_arguments(parser)
    help_text = " ".join(parser.format_help().split())
    assert "--max-num-seqs MAX_NUM_SEQS continuous: most running sequences (default 32)" in help_text
    assert "--preferred-batch-sizes PREFERRED_BATCH_SIZES dynamic: e.g. 4,8 (default none)" in help_text
    args = parser.parse_args(["--batch-size", "4", "--preferred-batch-sizes", "2,4"])
    assert vars(args) == {"batch_size": 4, "preferred_batch_sizes": (2, 4)}   # left out = the strategy's default
    assert limits_from_args("static", args) == StaticLimits(batch_size=4)


# -- a fifth strategy, registered at test time ---------------------------------------------------
def test_the_toy_strategy_runs_in_the_engine(lockstep, one_torch_thread):
    from reference_server.engine.config import EngineConfig
    from reference_server.engine.engine import Engine
    from engine_core.scheduling.sampling import SamplingParams

    config = EngineConfig.from_flags(model="tiny", strategy="lockstep", lockstep_size=3, max_num_seqs=4)
    assert config.limits == toy_strategy.LockstepLimits(lockstep_size=3)
    engines = {"lockstep": Engine(config), "none": Engine(EngineConfig(model="tiny", strategy="none"))}
    outputs, batches = {}, {}
    for name, engine in engines.items():
        for i in range(5):
            engine.add_request(f"r{i}", [10 + i, 20, 30, 40 + i],
                               SamplingParams(max_tokens=6, ignore_eos=True, temperature=0.0))
        tokens = outputs[name] = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                tokens.setdefault(out.request_id, []).extend(out.new_token_ids)
            batches.setdefault(name, []).append(engine.stats().last_batch_size)
        assert engine.stats().kv_blocks_used == 0
    assert batches["lockstep"] == [3] * 6 + [2] * 6   # a batch of three run out (prefill + 5 decodes), then two
    assert outputs["lockstep"] == outputs["none"]   # batching never changes greedy tokens
    assert engines["lockstep"].describe()["strategy"] == "lockstep"
    assert engines["lockstep"].describe()["strategy_limits"] == {"lockstep_size": 3}


@pytest.mark.slow
def test_the_toy_strategy_serves_from_a_server_subprocess():
    """The subprocess (and its spawned engine process) register the toy from SERVECAP_STRATEGY_MODULES."""
    from servecap.launch.process import ServerProcess
    from servecap.launch.spec import ReferenceServerSpec

    env = {PLUGIN_ENV: "toy_strategy", "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    args = ["--model", "tiny", "--strategy", "lockstep", "--lockstep-size", "3", "--batch-size", "4",
            "--no-classifier"]
    # raw flags: this process's parser does not know the toy's --lockstep-size (only the child registers it)
    with ServerProcess(ReferenceServerSpec(options=tuple(args)), env=env) as server:
        engine = httpx.get(server.base_url + "/v1/engine").json()
        assert engine["strategy"] == "lockstep" and engine["strategy_limits"] == {"lockstep_size": 3}
        reply = httpx.post(server.base_url + "/v1/completions",
                           json={"model": "tiny", "prompt": "hi", "max_tokens": 3, "ignore_eos": True}, timeout=60)
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 3


@pytest.mark.slow
def test_a_strategy_module_that_cannot_be_imported_is_named_when_its_strategy_is_asked_for():
    env = {**os.environ, PLUGIN_ENV: "no_such_strategy_module", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "reference_server", "--strategy", "lockstep"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "strategy must be one of none, static, dynamic, continuous, got 'lockstep'" in done.stderr
    assert "cannot register a strategy from module 'no_such_strategy_module'" in done.stderr


def test_the_toy_strategy_runs_in_the_simulator(lockstep):
    from calculators.sim.simulate import SimServer, SimWorkload, simulate, simulate_trace
    from contract.distributions import LengthDistribution
    from calculators.sim.step_model import StepTimeModel

    server = SimServer.from_flags("lockstep", lockstep_size=3, batch_size=8)
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(8),
                        output_tokens=LengthDistribution.fixed(4), requests=12,
                        concurrency=6)
    trace = simulate_trace(server, workload, StepTimeModel(base_s=1.0))
    # six users wait at t=0; three launch, prefill (step 1) and decode three more; the next three follow
    np.testing.assert_array_equal(trace.first_token, [1, 1, 1, 5, 5, 5, 9, 9, 9, 13, 13, 13])
    np.testing.assert_array_equal(trace.end, [4, 4, 4, 8, 8, 8, 12, 12, 12, 16, 16, 16])
    assert simulate(server, workload, StepTimeModel(base_s=1.0)).mean_batch_size == 3


def test_the_sweep_and_the_report_take_the_toy_strategy(lockstep, tmp_path):
    from engine_core.models import get_model
    from reports.predict.per_level import predict_level
    from sweep_helpers import experiment
    from contract.level_result import LevelResult
    from contract.run_json import RunInfo

    assert experiment("--strategies", "lockstep,none", "--concurrency", "1").targets[0].strategy == "lockstep"
    run = RunInfo.from_dict({"server": {"model": "tiny", "block_size": 16, "engines": {
        "lockstep": {"strategy_limits": {"lockstep_size": 3}, "num_kv_blocks": 64}}}})
    level = LevelResult.from_dict({"level": "lockstep/c=8", "strategy": "lockstep", "offered": {"concurrency": 8},
                                   "prompt_tokens_mean": 8, "output_tokens_mean": 4})
    predicted = predict_level(run, level, get_model("tiny"), None, "no step model in this test")
    assert predicted.comparisons["running_sequences_peak"].predicted == 3
