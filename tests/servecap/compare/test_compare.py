"""`servecap compare` end to end: two real reference servers, the real Locust, slices, the paired verdict.

Sized to pass on a loaded CI machine: 60% thresholds (an A/A run's per-pair noise there can
reach 40%), and a regression of 20 ms per engine step (about 10x the tiny preset's step).
How sharp the paired gate is on a quiet machine is shown by `python -m lab.servecap.gate_evidence
--paired`, not here.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

from servecap.cli import main as servecap_main
from contract.run_json import read_run_json

pytestmark = pytest.mark.e2e   # real compares of two servers: make test-e2e

SERVECAP = [sys.executable, "-m", "servecap"]
LOOSE = ["--max-regression", "tpot_s.p50=60%,e2e_s.p50=60%", "--no-defaults"]
SHORT = ["--concurrency", "2", "--warmup", "1s", "--slice", "1s", "--pilot-pairs", "3", "--max-pairs", "6",
         "--output-tokens", "uniform:8:24", "--prompt-tokens", "uniform:8:32"]


def compare(out, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*SERVECAP, "compare", "--out", str(out), *SHORT, *LOOSE, *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return {"aa": (root / "aa", compare(root / "aa", "--a-args", "", "--b-args", "")),
            "slow": (root / "slow", compare(root / "slow", "--a-args", "", "--b-args", "--inject-step-delay-ms 20")),
            "duet": (root / "duet", compare(root / "duet", "--a-args", "", "--b-args", "--inject-step-delay-ms 20",
                                            "--schedule", "duet"))}


@pytest.mark.slow
def test_a_over_a_passes_and_writes_every_file(runs):
    out, done = runs["aa"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "NO REGRESSION" in done.stdout and "power: about" in done.stderr
    for name in ("run.json", "requests.jsonl", "slices.jsonl", "compare.json", "compare.md", "compare_ratios.png",
                 "server-a.log", "server-b.log"):
        assert (out / name).exists(), name
    info = read_run_json(out / "run.json").compare
    assert set(info.arms) == {"a", "b"} and all(arm.pid and arm.kind == "reference_server" for arm in info.arms.values())
    assert info.slice_s == 1.0 and info.planned_pairs <= 6 and info.looks and info.power["pairs"] >= 3
    slices = [json.loads(line) for line in (out / "slices.jsonl").read_text().splitlines()]
    measured = [s for s in slices if s["phase"] == "measure"]
    assert [s["arm"] for s in slices[:2]] == ["a", "b"] and len(measured) == 2 * info.looks[-1].pairs
    assert all(s["cpu_s"] is not None and s["cpu_s"] > 0 for s in measured)     # the server trees' CPU time
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert {r["arm"] for r in records} == {"a", "b"} and all(r["slice"] is not None for r in records)
    result = json.loads((out / "compare.json").read_text())
    assert result["exit_code"] == 0 and result["gated"] == ["tpot_s.p50", "e2e_s.p50"]


@pytest.mark.slow
def test_a_gross_regression_fails_on_tpot_and_gate_dir_agrees(runs):
    out, done = runs["slow"]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads((out / "compare.json").read_text())
    assert "tpot_s.p50" in result["worse"]
    tpot = next(m for m in result["metrics"] if m["metric"] == "tpot_s.p50")
    assert tpot["ratio"] > 3
    engine_b = read_run_json(out / "run.json").compare.arms["b"].engine
    assert engine_b["inject_step_delay_ms"] == 20.0
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = servecap_main(["gate", str(out)])
    assert code == 1 and "REGRESSION" in stdout.getvalue()


def _compare_in_process(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            code = servecap_main(["compare", *args])
        except SystemExit as exc:   # argparse
            code = exc.code
    return code, err.getvalue()


@pytest.mark.slow
def test_a_duet_loads_both_arms_at_once_and_catches_the_same_regression(runs):
    out, done = runs["duet"]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Both arms were loaded at the same time" in (out / "compare.md").read_text()
    info = read_run_json(out / "run.json").compare
    assert info.schedule == "duet"
    slices = [json.loads(line) for line in (out / "slices.jsonl").read_text().splitlines()]
    by_pair: dict = {}
    for s in slices:
        by_pair.setdefault((s["phase"], s["pair"]), []).append(s)
    assert all(sorted(s["arm"] for s in group) == ["a", "b"] and group[0]["t_start"] == group[1]["t_start"]
               for group in by_pair.values())   # each pair's two slices ran at once
    result = json.loads((out / "compare.json").read_text())
    assert result["schedule"] == "duet" and "tpot_s.p50" in result["worse"]


@pytest.mark.parametrize("args, message", [
    (["--concurrency", "2", "--a-args", "", "--a-url", "http://x", "--b-args", ""], "exactly one of --a-args"),
    (["--a-args", "", "--b-args", ""], "--concurrency N"),
    (["--concurrency", "2", "--rates", "1", "--a-args", "", "--b-args", ""], "choose one load"),
    (["--concurrency", "2,4", "--a-args", "", "--b-args", ""], "exactly one load"),
    (["--concurrency", "2", "--a-args", "", "--b-args", "", "--trace", "t.jsonl"], "--trace"),
    (["--concurrency", "2", "--a-args=--no-such-flag", "--b-args", ""], "no-such-flag"),
    (["--concurrency", "2", "--a-args=--model small", "--b-args", ""], "the model comes from --model"),
    (["--concurrency", "2", "--a-cmd", "python -m x", "--b-args", ""], "{port}"),
    (["--concurrency", "2", "--a-args", "", "--b-url", "ftp://x"], "http://"),
    (["--concurrency", "2", "--a-args", "", "--b-args", "", "--max-regression", "tpot_s.p99=5%"], "cannot gate"),
    (["--concurrency", "2", "--a-args", "", "--b-args", "", "--min-effect", "150%"], "--min-effect"),
    (["--concurrency", "2", "--a-args", "", "--b-args", "", "--schedule", "trio"], "--schedule"),
])
def test_bad_input_exits_2_with_a_message_before_anything_starts(tmp_path, args, message):
    code, err = _compare_in_process("--out", str(tmp_path / "x"), *args)
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "x" / "requests.jsonl").exists()


def _chats(path):
    """Six three-turn conversations (chat JSONL), lengths in bytes (the reference server's tokens)."""
    with open(path, "w") as handle:
        for i in range(6):
            messages = []
            for turn in range(3):
                messages += [{"role": "user", "content": f"question {i}.{turn} " + "x" * (10 + 5 * turn)},
                             {"role": "assistant", "content": "y" * (8 + 4 * turn)}]
            handle.write(json.dumps({"messages": messages}) + "\n")
    return path


@pytest.mark.slow
def test_two_emulated_arms_compared_on_a_dataset_of_multi_turn_chats(tmp_path):
    """The sweep's workload options reach a compare run: two --emulate arms (the same GPU, B with one running
    sequence), a dataset's conversations sent turn by turn, each conversation inside its slice."""
    out = tmp_path / "emulated"
    done = subprocess.run([*SERVECAP, "compare", "--out", str(out), "--emulate", "h100-sxm", "--model", "llama-3.1-8b",
                           "--concurrency", "2", "--warmup", "1s", "--slice", "1s", "--pilot-pairs", "2",
                           "--max-pairs", "3", "--dataset", str(_chats(tmp_path / "chats.jsonl")), "--turns", "all",
                           "--chars-per-token", "1", "--a-args", "", "--b-args", "--max-num-seqs 1",
                           "--slo-e2e-ms", "60000", *LOOSE], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1, 3), done.stdout[-2000:] + done.stderr[-3000:]
    run = read_run_json(out / "run.json")
    arms = run.compare.arms
    assert all(arm.engine["emulation"]["gpu"] == "h100-sxm" for arm in arms.values())
    assert arms["b"].engine["strategy_limits"]["max_num_seqs"] == 1 and "--max-num-seqs" not in arms["a"].args
    assert run.workload.turns is None and run.workload.dataset == str(tmp_path / "chats.jsonl")
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if r["phase"] == "measure"]
    assert {r["arm"] for r in measured} == {"a", "b"} and all(r["status"] == "ok" for r in records)
    turns = {r["turn"] for r in measured}
    assert turns >= {1, 2, 3} and all(r["conversation_id"] for r in measured)
    # a later turn sends the whole history: longer than the first turn of the same conversation
    by_conversation: dict = {}
    for r in records:
        by_conversation.setdefault((r["arm"], r["slice"], r["conversation_id"]), {})[r["turn"]] = r["prompt_tokens_asked"]
    assert all(turns[2] > turns[1] for turns in by_conversation.values() if 1 in turns and 2 in turns)
    # a conversation stays in its slice: its turns all went to one arm
    assert all(len({r["arm"] for r in records if r["conversation_id"] == cid and r["slice"] == s}) == 1
               for cid, s in {(r["conversation_id"], r["slice"]) for r in records})
    assert "arm A meets the SLO" in done.stdout and "arm B meets the SLO" in done.stdout
