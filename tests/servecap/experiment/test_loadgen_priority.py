import os
import subprocess
import sys

import pytest

from servecap.experiment import loadgen_priority
from servecap.experiment.loadgen_priority import LOADGEN_NICE, choose_priority
from servecap.experiment.run_options import RunOptions


def test_each_mode_falls_back_to_the_next_where_not_allowed(monkeypatch):
    monkeypatch.setattr(loadgen_priority, "_may_raise_priority", lambda: True)
    monkeypatch.setattr(loadgen_priority, "_realtime_allowed", lambda: False)
    nice = choose_priority("realtime")
    assert (nice.mode, nice.prefix, nice.niceness, nice.describe()) == (
        "nice", ("nice", "-n", str(LOADGEN_NICE)), LOADGEN_NICE, f"nice {LOADGEN_NICE}")
    monkeypatch.setattr(loadgen_priority, "_may_raise_priority", lambda: False)
    for asked in ("realtime", "nice", "normal"):
        normal = choose_priority(asked)
        assert (normal.mode, normal.prefix, normal.niceness, normal.describe()) == ("normal", (), None, None)


def test_an_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="one of realtime, nice, normal, not 'fast'"):
        choose_priority("fast")
    with pytest.raises(ValueError, match="--loadgen-priority must be one of"):
        RunOptions(loadgen_priority="fast")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="real-time priority needs root")
def test_realtime_runs_the_load_generator_under_sched_fifo():
    chosen = choose_priority("realtime")
    if chosen.mode != "realtime":
        pytest.skip("this machine's cgroup grants no real-time time (chrt -f 1 fails)")
    assert chosen.describe() == "SCHED_FIFO 1"
    child = subprocess.run([*chosen.prefix, sys.executable, "-c",
                            "import os; print(os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.split() == [str(os.SCHED_FIFO), "1"]
