"""A level's load-generator warnings over its rounds: one line per kind, the worst reading, the rounds it came in."""

from servecap.experiment.generator_warnings import level_warnings

LAG = "event-loop lag p99 {:.2f} ms > 1 ms: its timings may be off by that much; limited by the load generator"


def test_rounds_of_lag_from_one_process_each_are_one_line_with_the_worst_reading_and_the_rounds():
    # each round is a Locust process of its own ("local@vm:PID"); round 2 had no lag
    texts = [f"local@vm:7110: {LAG.format(3.1)}", f"local@vm:7231: {LAG.format(17.6)}",
             f"local@vm:7234: {LAG.format(1.02)}"]

    assert level_warnings(texts, rounds=4) == [f"local@vm: {LAG.format(17.6)} (in 3 of 4 rounds)"]


def test_kinds_keep_the_order_they_first_came_in_and_workers_stay_apart():
    cpu = "load generator CPU reached {}% (> 90%)"
    texts = [f"worker2@vm:51: {cpu.format(95)}", f"worker1@vm:50: {LAG.format(2.0)}",
             f"worker2@vm:61: {cpu.format(130)}", f"worker1@vm:60: {cpu.format(99)}",
             "worker1@vm:60: in-flight cap hit 3 times: arrivals were delayed"]

    assert level_warnings(texts, rounds=2) == [
        f"worker2@vm: {cpu.format(130)} (in 2 of 2 rounds)",
        f"worker1@vm: {LAG.format(2.0)} (in 1 of 2 rounds)",
        f"worker1@vm: {cpu.format(99)} (in 1 of 2 rounds)",
        "worker1@vm: in-flight cap hit 3 times: arrivals were delayed (in 1 of 2 rounds)",
    ]


def test_one_round_prints_what_it_said_and_nothing_gives_nothing():
    text = f"local@vm:7110: {LAG.format(1.5)}"
    assert level_warnings([text], rounds=1) == [text]
    assert level_warnings([], rounds=4) == []
