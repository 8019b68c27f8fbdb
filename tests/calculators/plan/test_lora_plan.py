"""LoRA in the fleet plan: each request's adapter drawn from a mix, replicas with the engine's slots and the
adapters' step costs, and a mix refused where no replica serves adapters."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.plan.demand import Demand
from calculators.plan.fleet import FleetConfig, ReplicaSpec, run_fleet
from calculators.sim.lora_step import LoraServing
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from contract.model_mix import parse_model_mix

STEP = StepTimeModel(base_s=0.01)


def _spec(lora: LoraServing | None) -> ReplicaSpec:
    return ReplicaSpec(SimServer(strategy="continuous", lora=lora, num_kv_blocks=4000), STEP, 4000)


def _demand(n: int = 400, gap: float = 0.05) -> Demand:
    return Demand(t_s=np.arange(n) * gap, prompt=np.full(n, 32, dtype=np.int64), output=np.full(n, 20, dtype=np.int64),
                  session=np.full(n, -1, dtype=np.int64), prefix=None)


def test_fewer_slots_make_requests_wait_and_free_adapters_change_nothing():
    costs = dict(load_s=0.01)   # cold loads only: more slots can only help
    mix = parse_model_mix("zipf:32")
    plain = run_fleet(_demand(), FleetConfig(_spec(None), initial_replicas=1))
    free = run_fleet(_demand(), FleetConfig(_spec(LoraServing(32)), initial_replicas=1, model_mix=mix))
    assert np.allclose(free.first_token_s, plain.first_token_s, equal_nan=True)
    wide = run_fleet(_demand(), FleetConfig(_spec(LoraServing(32, **costs)), initial_replicas=1, model_mix=mix))
    narrow = run_fleet(_demand(), FleetConfig(_spec(LoraServing(2, **costs)), initial_replicas=1, model_mix=mix))
    ttft = lambda run: np.nanpercentile(run.first_token_s - run.send_s, 99)   # noqa: E731
    assert ttft(narrow) > 3 * ttft(wide) and ttft(wide) >= ttft(plain)


def test_a_mix_needs_replicas_that_serve_adapters():
    with pytest.raises(ValueError, match="a model mix needs replicas that serve LoRA adapters"):
        FleetConfig(_spec(None), initial_replicas=1, model_mix=parse_model_mix("zipf:4"))
