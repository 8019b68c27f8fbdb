"""servecap.experiment.profiles: each load profile step by step, on made-up level results."""

from types import SimpleNamespace

import pytest

from contract.slo import SLO, Judgement
from servecap.experiment.profiles import FixedLevels, KneeSearch, Level, RateSweep, TraceReplay, drive


class Passes:
    """A level result that meets the SLO when its load is at most `knee`."""

    def __init__(self, load: float, knee: float, rate: float | None = None) -> None:
        self.meets, self.request_rate_rps = load <= knee, rate

    def check(self, slo):
        return Judgement(self.meets, "" if self.meets else "too slow")


@pytest.mark.parametrize("knee, tried, found", [
    (6, [1, 2, 4, 8, 6, 7], (6, 7)),             # ramp to the first miss, bisect to adjacent levels
    (0, [1], (None, 1)),                         # even one user misses
    (1, [1, 2], (1, 2)),
    (100, [1, 2, 4, 8, 16, 32, 64, 128, 96, 112, 104], (96, 104)),    # stops within 12.5% of 96
    (300, [1, 2, 4, 8, 16, 32, 64, 128, 256], (256, None)),           # never misses up to the limit
])
def test_knee_search(knee, tried, found):
    asked = []

    def measure(level: Level):
        asked.append(int(level.load))
        assert not level.open_loop and level.round is None
        return Passes(level.load, knee)

    result = drive(KneeSearch(SLO(ttft_ms=100), max_concurrency=256).steps(), measure)
    assert asked == tried and (result.max_meeting_slo, result.first_failing) == found
    # every level tried at or below the answer met the SLO and every one above it missed
    assert all((c <= (result.max_meeting_slo or 0)) == (c <= knee) for c in asked)


def test_a_knee_search_needs_an_slo():
    with pytest.raises(ValueError, match="--auto needs at least one SLO"):
        KneeSearch(SLO(), 256)


def test_fixed_levels_in_rounds_go_serpentine():
    asked = []
    outcome = drive(FixedLevels((1, 2, 4), open_loop=False, rounds=3).steps(),
                    lambda level: asked.append((level.load, level.round)))
    assert outcome is None
    assert asked == [(1, 0), (2, 0), (4, 0), (4, 1), (2, 1), (1, 1), (1, 2), (2, 2), (4, 2)]
    once = []
    drive(FixedLevels((2.0, 8.0), open_loop=True).steps(), lambda level: once.append(level))
    assert once == [Level(2.0, True), Level(8.0, True)]


def test_rate_sweep_spaces_its_rates_from_the_synchronous_rate_to_saturation():
    asked = []

    def measure(level: Level):
        asked.append(level)
        return SimpleNamespace(request_rate_rps={1: 2.0, 64: 10.0}.get(level.load))

    outcome = drive(RateSweep(levels=6, max_concurrency=64).steps(), measure)
    assert [(level.load, level.open_loop) for level in asked] == [
        (1, False), (64, False), (4.0, True), (6.0, True), (8.0, True), (10.0, True)]
    assert outcome.rates == (4.0, 6.0, 8.0, 10.0)


def test_rate_sweep_without_a_rate_says_so():
    outcome = drive(RateSweep(3, 8).steps(), lambda level: SimpleNamespace(request_rate_rps=None))
    assert outcome.rates == () and "no rates to sweep" in outcome.notes[0]


def test_trace_replay_is_one_level_at_the_traces_own_times():
    asked = []
    drive(TraceReplay(2.5, (1.0, 9.0)).steps(), asked.append)
    assert asked == [Level(2.5, open_loop=True, window=(1.0, 9.0), trace=True)]


def test_a_trace_of_sessions_runs_until_its_longest_chain_has_had_its_turns(tmp_path):
    from contract.load import LoadSpec
    from contract.workload import WorkloadSpec
    from servecap.experiment.spec import TRACE_TAIL_S, TRACE_TURN_TAIL_S, Experiment
    from servecap.experiment.targets import TargetSpec

    trace = tmp_path / "sessions.jsonl"
    # a: 0 s, then 4 s and 6 s after its answers (10 s of delays, three turns); b: one row at 2 s
    trace.write_text('{"session_id": "a", "timestamp": 0, "input_length": 8, "output_length": 2}\n'
                     '{"session_id": "b", "timestamp": 2000, "input_length": 8, "output_length": 2}\n'
                     '{"session_id": "a", "delay": 4000, "input_length": 8, "output_length": 2}\n'
                     '{"session_id": "a", "delay": 6000, "input_length": 8, "output_length": 2}\n')

    def window(path, speedup=1.0):
        return Experiment("out", (TargetSpec("url", None, url="http://127.0.0.1:1"),),
                          workload=WorkloadSpec(trace=str(path), trace_speedup=speedup),
                          load=LoadSpec(warmup_s=0.0)).trace_window()

    assert window(trace) == (0.0, 10.0 + 3 * TRACE_TURN_TAIL_S)
    assert window(trace, speedup=2.0) == (0.0, 5.0 + 3 * TRACE_TURN_TAIL_S)
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"timestamp": 0, "input_length": 8, "output_length": 2}\n'
                     '{"timestamp": 3000, "input_length": 8, "output_length": 2}\n')
    assert window(plain) == (0.0, 3.0 + TRACE_TAIL_S)
