"""The real `locust -f loadgen/chat.py --slice-plan PLAN` against two scripted servers:
each slice's requests go to its arm, a pair's two slices send the same sequence, and the
records and the slices log say what happened at each switch."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from loadgen.workload.slice_plan import ArmRoute, SlicePlan, pair_slices, warmup_slices
from loadgen_helpers import read_truth, run_locust, scripted_server

pytestmark = pytest.mark.slow


def _run(tmp_path, at_switch: str, ttft_b: float = 0.02, users: int = 3, **plan_args):
    with scripted_server(tmp_path, "--ttft", "0.02", "--itl", "0.004") as (url_a, truth_a), \
            scripted_server(tmp_path, "--ttft", str(ttft_b), "--itl", "0.004") as (url_b, truth_b):
        slices = warmup_slices(0, 0.6, run_seed=3) + pair_slices(0, 3, 2, 0.8, run_seed=3)
        plan = SlicePlan(arms={"a": ArmRoute(url_a, "scripted"), "b": ArmRoute(url_b, "scripted")},
                         slices=tuple(slices), at_switch=at_switch, slices_log=str(tmp_path / "slices.jsonl"),
                         **plan_args)
        (tmp_path / "plan.json").write_text(plan.to_json())
        records = tmp_path / "r.jsonl"
        done = run_locust("--host", url_a, "-u", str(users), "-r", str(users), "-t", "60s", "--records", str(records),
                          "--slice-plan", str(tmp_path / "plan.json"), "--model", "scripted", "--level", "c=3",
                          "--prompt-tokens", "uniform:8:64", "--output-tokens", "uniform:4:30", timeout=90)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return ([json.loads(line) for line in records.read_text().splitlines()],
                [json.loads(line) for line in (tmp_path / "slices.jsonl").read_text().splitlines()],
                read_truth(truth_a), read_truth(truth_b), slices)


def test_each_slice_goes_to_its_arm_and_a_pair_sends_the_same_sequence(tmp_path):
    records, log, truth_a, truth_b, slices = _run(tmp_path, "drain")
    assert [line["slice"] for line in log] == [s.index for s in slices]
    assert all(line["t_start"] < line["t_end"] <= line["t_drained"] for line in log)
    arm_of = {s.index: s.arm for s in slices}
    by_slice = defaultdict(list)
    for record in records:
        assert record["arm"] == arm_of[record["slice"]] and record["level"] == f"{record['arm']}/c=3"
        assert record["status"] == "ok" and record["switch"] in (None, "drained")
        assert record["response_id"] in (truth_a if record["arm"] == "a" else truth_b)   # it went to that server
        by_slice[record["slice"]].append(record)
    for s in slices:
        assert by_slice[s.index], f"slice {s.index} sent nothing"
        assert {r["phase"] for r in by_slice[s.index]} == {s.phase}
    for first, second in zip(slices[2::2], slices[3::2]):   # the pairs
        def sequence(index):   # request k of a slice: its asked lengths, in send order
            return [(r["prompt_tokens_asked"], r["output_tokens_asked"])
                    for r in sorted(by_slice[index], key=lambda r: int(r["request_id"].split("#")[1]))]
        a, b = sequence(first.index), sequence(second.index)
        common = min(len(a), len(b))
        assert common >= 5 and a[:common] == b[:common]
    # a drained request finished after its slice's switch; the slices log counts them
    drained = sum(r["switch"] == "drained" for r in records)
    assert drained == sum(line["drained"] for line in log) and drained >= len(slices)   # 3 users in flight each time
    assert sum(line["sent"] for line in log) == len(records)


def test_exclude_cuts_off_what_is_in_flight_at_the_switch(tmp_path):
    records, log, *_ = _run(tmp_path, "exclude", ttft_b=0.3)
    cut = [r for r in records if r["switch"] == "excluded"]
    assert cut and all(r["status"] == "incomplete" for r in cut)
    assert len(cut) == sum(line["excluded"] for line in log)
    assert not any(r["switch"] == "drained" for r in records)
    assert all(line["t_drained"] - line["t_end"] < 0.25 for line in log)   # no waiting for the slow arm


def test_a_drain_that_times_out_cuts_the_rest_off(tmp_path):
    records, log, *_ = _run(tmp_path, "drain", ttft_b=2.0, drain_timeout_s=0.2)
    b_slices = {line["slice"] for line in log if line["arm"] == "b"}
    assert any(r["switch"] == "excluded" for r in records if r["slice"] in b_slices)
    assert all(line["t_drained"] - line["t_end"] < 1.0 for line in log)


def test_a_duet_loads_both_arms_at_once_with_the_users_split_between_them(tmp_path):
    records, log, truth_a, truth_b, slices = _run(tmp_path, "drain", users=6, schedule="duet")
    by_pair = defaultdict(dict)
    for line in log:
        by_pair[line["pair"]][line["arm"]] = line
    assert set(by_pair) == {None, 0, 1, 2} and all(set(arms) == {"a", "b"} for arms in by_pair.values())
    for arms in by_pair.values():   # the two slices of a pair (and of the warm-up) start and switch together
        assert arms["a"]["t_start"] == arms["b"]["t_start"] and arms["a"]["t_end"] == pytest.approx(arms["b"]["t_end"])
    for arm, truth in (("a", truth_a), ("b", truth_b)):
        mine = [r for r in records if r["arm"] == arm]
        assert mine and all(r["response_id"] in truth and r["status"] == "ok" for r in mine)
        # 3 users per arm: never more than 3 of an arm's requests in flight at once
        events = sorted([(r["t_start"], 1) for r in mine] + [(r["t_start"] + r["e2e_s"], -1) for r in mine])
        inflight = peak = 0
        for _, step in events:
            inflight += step
            peak = max(peak, inflight)
        assert peak == 3
    by_slice = defaultdict(list)
    for record in records:
        by_slice[record["slice"]].append(record)
    for pair in (0, 1, 2):   # both arms were sent the same sequence within a pair
        a, b = (sorted(((int(r["request_id"].split("#")[1]), r["output_tokens_asked"]) for r in
                        by_slice[by_pair[pair][arm]["slice"]])) for arm in ("a", "b"))
        common = min(len(a), len(b))
        assert common >= 5 and a[:common] == b[:common]
