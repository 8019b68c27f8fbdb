"""`--session`: the spec's forms, its draws, and the workloads it refuses (contract.agent_session)."""

import random

import pytest

from contract.agent_session import LatencyDistribution, SessionSpec, parse_latency, parse_session
from contract.workload import WorkloadSpec


def test_every_key_and_the_defaults():
    spec = parse_session("turns:8,tools:0-3,tool-latency:lognormal:1.5:0.8,tool-result:uniform:64:512,fanout:1-2,"
                         "schemas:6")
    assert (spec.turns, spec.tools, spec.fanout, spec.schemas) == (8, (0, 3), (1, 2), 6)
    assert spec.tool_latency == LatencyDistribution("lognormal", (1.5, 0.8))
    assert (spec.tool_result.kind, spec.tool_result.params) == ("uniform", (64, 512))
    default = parse_session("turns:2")
    assert (default.tools, default.fanout, default.schemas, default.tool_result.params) == ((0, 2), (0, 0), 4, (256,))
    assert parse_session(None) is None and parse_session("  ") is None
    assert parse_session("tools:2").tools == (2, 2)


@pytest.mark.parametrize("text, says", [
    ("turns", "is not KEY:VALUE"), ("rounds:2", "unknown key 'rounds'"), ("turns:0", "turns must be >= 1"),
    ("turns:2,turns:3", "turns given twice"), ("tools:3-1", "runs backwards"), ("tools:1.5", "not a whole number"),
    ("tool-latency:-1", "finite and >= 0"), ("tool-latency:gamma:1:2", "kind must be one of"),
    ("tool-latency:uniform:2:1", "must be >= low"), ("tool-result:0", "--session tool-result"),
    ("tools:0,fanout:2", "fanout runs in a turn's first tool round"), ("schemas:0", "schemas must be >= 1"),
])
def test_a_bad_spec_names_its_part(text, says):
    with pytest.raises(ValueError, match="--session") as caught:
        parse_session(text)
    assert says in str(caught.value)


def test_latency_draws_keep_their_bounds_and_mean():
    rng = random.Random(1)
    assert parse_latency("0.25").sample(rng) == 0.25
    uniform = [parse_latency("uniform:0.1:0.3").sample(rng) for _ in range(2000)]
    assert min(uniform) >= 0.1 and max(uniform) <= 0.3
    lognormal = [parse_latency("lognormal:2:0.5").sample(rng) for _ in range(20000)]
    assert sum(lognormal) / len(lognormal) == pytest.approx(2.0, rel=0.03)   # the mean of the latencies, as asked
    exponential = [parse_latency("exponential:0.5").sample(rng) for _ in range(20000)]
    assert sum(exponential) / len(exponential) == pytest.approx(0.5, rel=0.03)


def test_a_turn_without_tool_rounds_never_fans_out():
    spec = SessionSpec(tools=(0, 1), fanout=(2, 2))
    rng = random.Random(3)
    plans = [spec.draw_turn(rng) for _ in range(200)]
    assert {(p.tool_rounds, p.fanout) for p in plans} == {(0, 0), (1, 2)}
    assert {p.requests for p in plans} == {1, 2}


@pytest.mark.parametrize("given, says", [
    (dict(turns=2), "does not combine with --trace, --dataset or --turns"),
    (dict(trace="t.csv"), "does not combine"),
    (dict(api="completions"), "needs --api chat"),
    (dict(scenario="embed"), "describe chat requests"),
])
def test_the_workloads_a_session_does_not_combine_with(given, says):
    with pytest.raises(ValueError, match=says):
        WorkloadSpec(session="turns:2", **given)


def test_a_session_workload_round_trips_through_run_json_and_locust_argv():
    spec = WorkloadSpec(session="turns:3,tools:1", think_time_s=0.5)
    assert spec.agentic and spec.session_spec.turns == 3
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    argv = spec.locust_argv()
    assert argv[argv.index("--session") + 1] == "turns:3,tools:1"
    assert "sessions turns:3,tools:1" in spec.describe()
