"""A sweep whose load generator failed on a level exits 1 and names the level (what it recorded is kept)."""

from __future__ import annotations

import servecap.experiment.runner as runner_module
from servecap.sweep.cli import main


class _Runner:
    """Stands in for the runner: the level's Locust exited 2 (it could not start the test)."""

    def __init__(self, experiment, console, *, command=None, config=None) -> None:
        self.out = experiment.out_dir
        self.status = "complete"
        self.failed_levels = [("url/c=1", 2)]

    def run(self):
        return self.out

    def grouped_warnings(self):
        return []


def test_a_failed_level_makes_the_sweep_exit_1_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner_module, "Runner", _Runner)
    out = tmp_path / "run"
    code = main(["--url", "http://127.0.0.1:9", "--concurrency", "1", "--duration", "1s", "--out", str(out),
                 "--no-report"])
    assert code == 1
    assert f"the load generator failed on url/c=1 (exit 2); see {out}/locust.log" in capsys.readouterr().err
