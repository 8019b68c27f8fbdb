"""A compare directory -> per-slice table -> verdict, and `servecap gate DIR`'s exit codes."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from compare_dirs import write_compare_dir
from reports.paired.analysis import CompareDirError, analyse, is_compare_dir
from reports.paired.decision import EXIT_NO_REGRESSION, EXIT_REGRESSION, EXIT_UNDECIDED, thresholds_for
from reports.paired.stats import SAME
from servecap.cli import main as servecap_main


def gate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = servecap_main(["gate", *args])
    return code, out.getvalue(), err.getvalue()


def test_the_slice_table_holds_each_arms_own_statistics(tmp_path):
    run = write_compare_dir(tmp_path / "c", pairs=8, effect=0.2, noise=0.0)
    analysis = analyse(run)
    table = analysis.table
    assert len(table) == 16 and set(table["arm"]) == {"a", "b"} and (table["requests"] == 30).all()
    wide = table.pivot(index="pair", columns="arm", values="tpot_s.p50")
    assert np.allclose(wide["b"] / wide["a"], 1.2, rtol=0.05)       # the effect, pair by pair
    itl = table.pivot(index="pair", columns="arm", values="itl_s.p50")
    assert np.allclose(itl["b"] / itl["a"], 1.2, rtol=0.05)
    cpu = table.pivot(index="pair", columns="arm", values="cpu_s_per_token")
    assert np.allclose(cpu["b"] / cpu["a"], 1.2, rtol=1e-6)
    assert sorted(analysis.pair_times()) == list(range(8))


def test_a_slowdown_is_worse_and_an_a_over_a_is_same_with_the_runs_own_thresholds(tmp_path):
    slow = analyse(write_compare_dir(tmp_path / "slow", pairs=24, effect=0.15))
    assert slow.verdict.exit_code == EXIT_REGRESSION and "tpot_s.p50" in slow.verdict.worse
    assert slow.verdict.gated == ("ttft_s.p50", "tpot_s.p50", "e2e_s.p50")
    same = analyse(write_compare_dir(tmp_path / "aa", pairs=30, effect=0.0, noise=0.01))
    assert same.verdict.exit_code == EXIT_NO_REGRESSION
    assert {r.verdict for r in same.verdict.gated_results()} == {SAME}
    few = analyse(write_compare_dir(tmp_path / "few", pairs=4, effect=0.0))
    assert few.verdict.exit_code == EXIT_UNDECIDED


def test_the_first_answer_token_is_judged_beside_the_others_and_gates_when_named(tmp_path):
    """A reasoning model 15% slower: TTFA (TTFT, then 24 reasoning decodes) is worse, and decides the exit code
    once --max-regression names it; without the name it is judged for information only."""
    run = write_compare_dir(tmp_path / "r", pairs=24, effect=0.15, reasoning=24, thresholds={"ttfa_s.p50": 0.05})
    analysis = analyse(run)
    ttfa = next(r for r in analysis.verdict.results if r.metric == "ttfa_s.p50")
    assert ttfa.verdict == "WORSE" and analysis.verdict.worse == ["ttfa_s.p50"]
    wide = analysis.table.pivot(index="pair", columns="arm", values="ttfa_s.p50")
    assert np.median(wide["b"] / wide["a"]) == pytest.approx(1.15, rel=0.03)   # pair by pair, under drift and noise
    assert (wide["a"] > 0.010 + 20 * 0.002).all()   # the answer after its reasoning, not the first token
    assert "ttfa_s.p50" not in thresholds_for(None)


def test_whole_arm_p99s_come_with_a_paired_interval(tmp_path):
    analysis = analyse(write_compare_dir(tmp_path / "c", pairs=16, effect=0.25))
    p99 = {q.metric: q for q in analysis.verdict.arm_p99}
    assert set(p99) == {"ttft_s.p99", "tpot_s.p99", "e2e_s.p99"}
    assert p99["tpot_s.p99"].ci[0] < 1.25 * 1.0 < p99["tpot_s.p99"].ci[1] + 0.1 and p99["tpot_s.p99"].ratio > 1.1


def test_gate_on_a_compare_dir_uses_the_paired_verdict_and_its_exit_codes(tmp_path):
    slow = write_compare_dir(tmp_path / "slow", pairs=24, effect=0.15)
    code, out, _ = gate(str(slow))
    assert code == EXIT_REGRESSION and "REGRESSION" in out and (slow / "gate.md").exists()
    code, out, _ = gate(str(slow), "--max-regression", "tpot_s.p50=60%,e2e_s.p50=60%", "--no-defaults", "--json")
    result = json.loads(out)
    assert code == EXIT_NO_REGRESSION and result["gated"] == ["tpot_s.p50", "e2e_s.p50"]
    assert {m["metric"]: m["verdict"] for m in result["metrics"]}["tpot_s.p50"] == SAME
    code, out, _ = gate(str(write_compare_dir(tmp_path / "cpu", pairs=24, cpu_effect=0.3)),
                        "--max-regression", "cpu_s_per_token=10%", "--no-defaults")
    assert code == EXIT_REGRESSION and "cpu_s_per_token" in out


def test_gate_refuses_what_it_cannot_judge_with_exit_2(tmp_path):
    assert gate(str(tmp_path))[0] == 2                                   # not a compare dir
    run = write_compare_dir(tmp_path / "c", pairs=6)
    code, _, err = gate(str(run), "--baseline", str(run))
    assert code == 2 and "not both" in err
    code, _, err = gate(str(run), "--max-regression", "a/c=4@tpot_s.p50=5%")
    assert code == 2 and "LEVEL@" in err
    code, _, err = gate(str(run), "--max-regression", "tpot_s.p99=5%")
    assert code == 2 and "cannot gate" in err
    assert gate()[0] == 2
    assert not is_compare_dir(tmp_path) and is_compare_dir(run)
    with pytest.raises(CompareDirError, match="not a compare run"):
        analyse(tmp_path)


def test_thresholds_default_to_the_p50s_and_throughput_at_five_percent():
    assert thresholds_for(None) == {"ttft_s.p50": 0.05, "tpot_s.p50": 0.05, "itl_s.p50": 0.05, "e2e_s.p50": 0.05,
                                    "output_tokens_per_s": 0.05}
    assert thresholds_for({"tpot_s.p90": 0.1})["tpot_s.p90"] == 0.1
    assert thresholds_for({"tpot_s.p90": 0.1}, replace_defaults=True) == {"tpot_s.p90": 0.1}
