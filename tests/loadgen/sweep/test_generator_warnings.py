"""A level's load-generator warnings over its rounds: one line per kind, the worst reading, the rounds it came in."""

from loadgen.sweep.generator_warnings import level_warnings

LAG = "local: event-loop lag p99 {:.2f} ms > 1 ms: its timings may be off by that much; limited by the load generator"


def test_four_rounds_of_lag_are_one_line_with_the_worst_reading_and_the_rounds_it_came_in():
    texts = [LAG.format(3.1), LAG.format(17.6), LAG.format(1.02)]   # round 2 had none

    assert level_warnings(texts, rounds=4) == [LAG.format(17.6) + " (in 3 of 4 rounds)"]


def test_kinds_keep_the_order_they_first_came_in_and_workers_stay_apart():
    cpu = "worker-2: load generator CPU reached {}% (> 90%)"
    texts = [cpu.format(95), LAG.format(2.0), cpu.format(130), "worker-1: in-flight cap hit 3 times: arrivals were delayed"]

    assert level_warnings(texts, rounds=2) == [
        cpu.format(130) + " (in 2 of 2 rounds)",
        LAG.format(2.0) + " (in 1 of 2 rounds)",
        "worker-1: in-flight cap hit 3 times: arrivals were delayed (in 1 of 2 rounds)",
    ]


def test_one_round_prints_what_it_said_and_nothing_gives_nothing():
    assert level_warnings([LAG.format(1.5)], rounds=1) == [LAG.format(1.5)]
    assert level_warnings([], rounds=4) == []
