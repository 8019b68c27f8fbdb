"""Faults a replica is given on purpose: parsed with one clear line, then each kind against a live server."""

from __future__ import annotations

import time

import httpx
import pytest

from reference_server.api.faults import Fault, FaultPlan

MODEL = "llama-3.1-8b"


@pytest.mark.parametrize("spec, fault", [
    ("slow:factor=3,at=10s,for=30s", Fault("slow", at_s=10, for_s=30, factor=3)),
    ("errors:status=503,rate=0.5,for=2m", Fault("errors", for_s=120, status=503, rate=0.5)),
    ("stall:at=250ms", Fault("stall", at_s=0.25)),
    ("crash:at=60", Fault("crash", at_s=60)),
])
def test_a_fault_spec_parses(spec, fault):
    assert Fault.parse(spec) == fault


@pytest.mark.parametrize("spec, message", [
    ("melt", "the kind is one of slow, errors, stall, crash"),
    ("slow:at=1s", "slow needs factor=F"),
    ("slow:factor=0.5", "factor must be greater than 1"),
    ("errors:status=200", "status must be a 4xx or 5xx"),
    ("errors:status=503,rate=2", "rate in (0, 1]"),
    ("stall:for=soon", "is not a duration"),
    ("crash:for=1s", "crash takes at, not 'for=1s'"),
    ("slow:factor=x", "factor='x' is not a number"),
])
def test_a_bad_fault_spec_says_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=None) as error:
        Fault.parse(spec)
    assert message in str(error.value) and spec in str(error.value)


def test_a_burst_draws_its_rate_from_a_seeded_stream_inside_its_window():
    now = [1000.0]
    plan = FaultPlan(seed=3, clock=lambda: now[0])
    plan.add(Fault("errors", at_s=1, for_s=10, status=503, rate=0.25))
    assert plan.error_now() is None                     # before the window
    now[0] = 1001.0
    hits = sum(plan.error_now() is not None for _ in range(400))
    again = FaultPlan(seed=3, clock=lambda: now[0])
    again.add(Fault("errors", at_s=0, for_s=10, status=503, rate=0.25))
    assert hits == sum(again.error_now() is not None for _ in range(400)) and 60 < hits < 140
    now[0] = 1011.0
    assert plan.error_now() is None                     # after it


def test_serve_refuses_a_bad_fault_with_exit_2(capsys):
    from reference_server.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--model", "tiny", "--fault", "slow:factor=1"])
    assert exit_.value.code == 2 and "--fault 'slow:factor=1': slow: factor must be greater than 1" in \
        capsys.readouterr().err


@pytest.fixture(scope="module")
def replica():
    from servecap.launch.process import ServerProcess
    from servecap.launch.spec import ReferenceServerSpec

    flags = ["--emulate", "h100-sxm", "--model", MODEL, "--no-classifier", "--engine-mode", "thread"]
    with ServerProcess(ReferenceServerSpec.from_flags(flags), startup_timeout_s=120) as server:
        yield server


def _complete(server, max_tokens=8) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/completions", timeout=30,
                      json={"model": MODEL, "prompt": "fault", "max_tokens": max_tokens, "ignore_eos": True})


def _set(server, *specs) -> dict:
    answer = httpx.post(server.base_url + "/admin/faults", json=list(specs), timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.slow
def test_a_slow_window_stretches_every_step_by_its_factor(replica):
    def mean_step_s() -> float:
        before = httpx.get(replica.base_url + "/v1/engine/steps", timeout=10).json()["rows"]
        assert _complete(replica, 24).status_code == 200
        rows = httpx.get(replica.base_url + "/v1/engine/steps", timeout=10).json()["rows"][len(before):]
        return sum(row[2] for row in rows[1:]) / len(rows[1:])   # the decodes (step_s is column 2)

    normal = mean_step_s()
    window = _set(replica, "slow:factor=3,for=1.2s")["set"][0]
    slowed = mean_step_s()
    assert slowed / normal == pytest.approx(3.0, rel=0.15)
    time.sleep(max(0.0, window["end_unix"] - time.time()) + 0.05)
    assert mean_step_s() / normal == pytest.approx(1.0, rel=0.15)


@pytest.mark.slow
def test_an_error_burst_answers_its_status_then_ends(replica):
    from servecap.fleet.replica_metrics import replica_load

    before = replica_load(httpx.get(replica.base_url + "/metrics", timeout=10).text)["injected_errors"]
    window = _set(replica, "errors:status=503,rate=1,for=0.5s")["set"][0]
    answer = _complete(replica)
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "injected_fault"
    metrics = httpx.get(replica.base_url + "/metrics", timeout=10).text   # counted as injected, not as draining
    assert replica_load(metrics)["injected_errors"] == before + 1 and 'reason="draining"' not in metrics
    time.sleep(max(0.0, window["end_unix"] - time.time()) + 0.05)
    assert _complete(replica).status_code == 200
    listed = httpx.get(replica.base_url + "/admin/faults", timeout=10).json()["faults"]
    assert any(f["kind"] == "errors" and f["status"] == 503 for f in listed)
    assert any(f["kind"] == "errors" for f in httpx.get(replica.base_url + "/v1/engine", timeout=10).json()["faults"])


@pytest.mark.slow
def test_a_stall_holds_a_request_to_the_windows_end_then_a_504(replica):
    _set(replica, "stall:for=0.4s")
    start = time.monotonic()
    answer = _complete(replica)
    assert answer.status_code == 504 and time.monotonic() - start == pytest.approx(0.4, abs=0.2)
    assert _complete(replica).status_code == 200


@pytest.mark.slow
def test_bad_faults_at_run_time_are_a_400(replica):
    answer = httpx.post(replica.base_url + "/admin/faults", json=["slow:factor=0"], timeout=10)
    assert answer.status_code == 400 and "factor must be greater than 1" in answer.json()["error"]["message"]
    assert httpx.post(replica.base_url + "/admin/faults", json={"kind": "slow"}, timeout=10).status_code == 400


@pytest.mark.slow
def test_a_crash_takes_the_process_down_with_status_1():
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-m", "reference_server", "--emulate", "h100-sxm", "--model", MODEL,
                                "--no-classifier", "--port", "0", "--fault", "crash:at=1s"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = process.communicate(timeout=90)
    finally:
        process.kill()
    assert process.returncode == 1 and "injected fault: crash" in err
