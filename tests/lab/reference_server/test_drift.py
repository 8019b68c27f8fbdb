"""The drift bench (lab.reference_server.drift): it runs and names bad arguments."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.reference_server import drift

REPO = Path(__file__).resolve().parents[3]   # `python -m lab...` needs the repository root on the path


@pytest.mark.slow
@pytest.mark.e2e   # a lab bench run end to end, as the other lab benches' runs (make test-e2e)
def test_drift_bench_times_blocks_in_one_process_and_in_fresh_ones():
    result = subprocess.run([sys.executable, "-m", "lab.reference_server.drift", "--blocks", "2", "--processes", "1",
                             "--block-s", "0.3", "--json"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert len(figures["one_process_ms"]) == 2 and len(figures["fresh_processes_ms"]) == 1
    assert all(0 < ms < 1000 for ms in figures["one_process_ms"] + figures["fresh_processes_ms"])


def test_drift_bench_names_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        drift.main(["--blocks", "0"])
    assert exit_info.value.code == 2 and "--blocks and --processes must be >= 1" in capsys.readouterr().err
