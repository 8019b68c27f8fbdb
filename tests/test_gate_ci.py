"""This project's own CI proves its gate: a short A/A pair passes, an injected slowdown fails.

Three real sweeps of the tiny preset (reference server + locust), then `servecap gate`.

Thresholds are wide on purpose: identical 6-second runs of the tiny preset on a 2-core host
differ by up to ~30% in p50 TPOT from one run to the next (pinned cores; measured with
`python -m servecap.gate_evidence`), a between-run noise that no within-run statistic can see,
so the default 10% thresholds would make this check flaky. ITL p50 is left out: on this server
the chunks of several tokens often leave in one burst, so its median flips between ~0 and one
step time. The injected 5 ms per step is several times the tiny preset's step time, far beyond
the thresholds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SERVECAP = [sys.executable, "-m", "servecap"]


def _sweep(out: Path, inject_ms: float = 0.0) -> Path:
    result = subprocess.run(
        [*SERVECAP, "sweep", "--out", str(out), "--strategies", "continuous", "--concurrency", "4",
         "--warmup", "1s", "--duration", "6s", "--prompt-tokens", "uniform:32:96", "--output-tokens", "uniform:16:48",
         "--server-args", f"--inject-step-delay-ms {inject_ms}", "--no-report"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


CI_THRESHOLDS = "ttft_s.p50=60%,tpot_s.p50=60%,e2e_s.p50=60%,e2e_s.p99=100%,output_tokens_per_s=40%"


def _gate(baseline: Path, current: Path) -> tuple[int, dict]:
    result = subprocess.run([*SERVECAP, "gate", "--baseline", str(baseline), "--current", str(current), "--json",
                             "--no-defaults", "--max-regression", CI_THRESHOLDS],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate-ci")
    return {"a": _sweep(root / "a"), "a2": _sweep(root / "a2"), "slow": _sweep(root / "slow", inject_ms=5.0)}


def test_a_over_a_passes(runs):
    code, report = _gate(runs["a"], runs["a2"])
    regressions = [f"{r['level']} {r['metric']} {r['ratio']:.2f} ci {r['ratio_ci95']} p {r['p_value']}" for r in report["rows"] if r["verdict"] == "REGRESSION"]
    assert code == 0, regressions


def test_injected_step_delay_fails_the_gate_on_tpot(runs):
    code, report = _gate(runs["a"], runs["slow"])
    assert code == 1
    tpot = next(r for r in report["rows"] if r["metric"] == "tpot_s.p50")
    assert tpot["verdict"] == "REGRESSION" and tpot["ratio_ci95"][0] > 1.1, tpot
    engine = json.loads((runs["slow"] / "run.json").read_text())["server"]["engines"]["continuous"]
    assert engine["inject_step_delay_ms"] == 5.0
