"""Load shapes: pure plans, and `--shape` driving Locust users (records labelled per stage)."""

import pytest

from contract.records import read_records
from loadgen.workload.shape_plans import parse_shape
from loadgen_helpers import CHAT, REPO, run_locust, scripted_server

SHAPES = str(REPO / "loadgen" / "shapes.py")


def test_step_plan():
    plan = parse_shape("step:1,4,8:10")
    assert [plan.at(t) for t in (0, 9.9, 10, 25, 29.9)] == [(1, 8.0), (1, 8.0), (4, 8.0), (8, 8.0), (8, 8.0)]
    assert plan.at(30) is None and plan.duration_s == 30


def test_ramp_and_spike_plans():
    ramp = parse_shape("ramp:0:10:10", spawn_rate=5)
    assert [ramp.at(t)[0] for t in (0, 2.5, 5, 9.99)] == [0, 2, 5, 10] and ramp.at(10) is None
    assert ramp.at(1)[1] == 5
    spike = parse_shape("spike:2:20:5:3")
    assert [spike.at(t)[0] for t in (0, 4.9, 5, 7.9, 8, 12.9)] == [2, 2, 20, 20, 2, 2] and spike.at(13) is None


@pytest.mark.parametrize("spec, message", [
    ("step:1,x:5", "not a whole number"), ("step:1,2", "step:U1"), ("ramp:1:2:0", "> 0 seconds"),
    ("spike:1:2:3", "spike:BASE"), ("wave:1", "not step"), ("step:0,0:1", "never has a user"),
])
def test_bad_shapes(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_shape(spec)


@pytest.mark.slow
def test_step_shape_drives_locust_and_labels_levels(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.01", "--itl", "0.002") as (url, _):
        proc = run_locust("--host", url, "--shape", "step:1,3:2", "--output-tokens", "3", "--records", str(records),
                          locustfile=f"{CHAT},{SHAPES}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Shape test completed" in proc.stderr
    rows = read_records(records)
    levels = [r["level"] for r in sorted(rows, key=lambda r: r["t_start"])]
    assert set(levels) == {"c=1", "c=3"} and levels[0] == "c=1" and levels[-1] == "c=3"
    # Locust ticks shapes once a second: 2 s stages stay aligned with the ticks, so both last 2 s;
    # three users then send more than one (not 3x on a CPU-bound box)
    assert levels.count("c=3") > levels.count("c=1")


@pytest.mark.slow
def test_shapes_file_without_shape_flag_is_a_clear_error():
    proc = run_locust("--host", "http://127.0.0.1:9", locustfile=f"{CHAT},{SHAPES}", timeout=30)
    assert proc.returncode == 2 and "no --shape was given" in proc.stderr and "Traceback" not in proc.stderr
