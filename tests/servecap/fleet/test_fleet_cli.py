"""`servecap fleet` refuses bad input with one line and exit 2, before anything starts."""

from __future__ import annotations

import pytest

from servecap.fleet.cli import main

REPLICA = ["--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 4096"]


def _error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line_naming_the_problem(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert "holds no request" in _error(capsys, ["--trace", str(empty), *REPLICA, "--replicas", "2"])
    backwards = tmp_path / "curve.csv"
    backwards.write_text("t_s,rate_rps\n0,1\n10,2\n5,3\n")
    assert "backwards" in _error(capsys, ["--rate-curve", str(backwards), *REPLICA, "--replicas", "2"])
    curve = tmp_path / "ok.csv"
    curve.write_text("0,1\n60,2\n")
    assert "--min-replicas 4 is above --max-replicas 2" in _error(
        capsys, ["--rate-curve", str(curve), *REPLICA, "--min-replicas", "4", "--max-replicas", "2", "--target", "8"])
    assert "unknown policy" in _error(capsys, ["--rate-curve", str(curve), *REPLICA, "--replicas", "2",
                                               "--router", "least_load"])
    assert "give one demand" in _error(capsys, [*REPLICA, "--replicas", "2"])
    assert "give one kind of replica" in _error(capsys, ["--rate-curve", str(curve), "--replicas", "2"])
    assert "--min-replicas must be at least 1" in _error(
        capsys, ["--rate-curve", str(curve), *REPLICA, "--min-replicas", "0", "--max-replicas", "2", "--target", "8"])
    assert "{port}" in _error(capsys, ["--rate-curve", str(curve), "--server-cmd", "vllm serve x", "--replicas", "1"])
    assert "this fleet's replicas are 0 to 2" in _error(capsys, ["--rate-curve", str(curve), *REPLICA, "--replicas", "2",
                                                             "--kill", "5", "--replica-fault", "3:stall"])
    assert "not --server-cmd" in _error(capsys, ["--rate-curve", str(curve), "--server-cmd", "srv --port {port}",
                                                 "--replicas", "1", "--replica-fault", "0:stall"])
    silent = tmp_path / "silent.csv"
    silent.write_text("0,0.001\n5,0.001\n")   # a rate so low that the 5 s draw no request
    for pools in (["--replicas", "2"], ["--topology", "1p1d"]):
        assert "the demand has no requests" in _error(capsys, ["--rate-curve", str(silent), *REPLICA, *pools])


def test_fixed_pools_refuse_what_they_do_not_run(tmp_path, capsys):
    curve = tmp_path / "ok.csv"
    curve.write_text("0,1\n60,2\n")
    base = ["--rate-curve", str(curve), *REPLICA, "--topology", "1p1d"]
    assert "--kill 10: with --topology 1p1d name the worker, T:ID, ID 0 to 0 a prefill worker, 1 to 1 a decode" in \
        _error(capsys, [*base, "--kill", "10"])
    assert "worker 1 is killed twice" in _error(capsys, [*base, "--kill", "10:1", "--kill", "20:1"])
    assert "--min-replicas/--max-replicas not with it" in _error(capsys, [*base, "--min-replicas", "1",
                                                                          "--max-replicas", "2", "--target", "4"])
    assert "give agg:N" in _error(capsys, [*REPLICA[:-2], "--rate-curve", str(curve), "--topology", "pd"])


def test_a_canary_is_emulated_replicas_behind_one_aggregated_pool(tmp_path, capsys):
    curve = tmp_path / "ok.csv"
    curve.write_text("0,1\n60,2\n")
    base = ["--rate-curve", str(curve), *REPLICA]
    assert "--canary-gpu: a canary needs --canary-weight" in _error(capsys, [*base, "--replicas", "1",
                                                                           "--canary-gpu", "h100-sxm"])
    assert "--canary-weight '0:0.1,0:0.2'" in _error(capsys, [*base, "--replicas", "1", "--canary-weight", "0:0.1,0:0.2"])
    assert "every request to one version" in _error(capsys, [*base, "--replicas", "1", "--canary-weight", "0"])
    assert "--canary-replicas must be at least 1" in _error(capsys, [*base, "--replicas", "1", "--canary-weight", "0.1",
                                                                   "--canary-replicas", "0"])
    for flag in (["--topology", "1p1d"], ["--canary-calibration", str(tmp_path)]):
        assert f"--canary-weight with {flag[0]}" in _error(capsys, [*base, *flag, "--canary-weight", "0.1"])
    assert "in (0, 1], got 1.5" in _error(capsys, [*base, "--replicas", "1", "--shadow-fraction", "1.5"])
    for flag in (["--topology", "1p1d"], ["--shadow-calibration", str(tmp_path)]):
        assert f"--shadow-fraction with {flag[0]}" in _error(capsys, [*base, *flag, "--shadow-fraction", "1"])
    assert "one second pool at a time" in _error(capsys, [*base, "--replicas", "1", "--shadow-fraction", "1",
                                                          "--canary-weight", "0.1"])
    assert "--fallback 'depth:two': depth:N takes an integer" in _error(capsys, [*base, "--replicas", "1", "--fallback",
                                                                              "depth:two"])
    assert "--fallback with --hedge-after" in _error(capsys, [*base, "--replicas", "1", "--fallback", "errors",
                                                              "--hedge-after", "0.5"])
    assert "--fallback-replicas: a fallback needs --fallback" in _error(capsys, [*base, "--replicas", "1",
                                                                                 "--fallback-replicas", "2"])
    assert "--canary-weight with --server-cmd" in _error(capsys, ["--rate-curve", str(curve), "--server-cmd",
                                                                  "srv --port {port}", "--replicas", "1",
                                                                  "--canary-weight", "0.1"])


def test_an_moe_layout_reaches_every_emulated_replica_or_is_refused_by_name(tmp_path, capsys):
    from servecap.fleet.cli import _launch, _parser
    from contract.config_file import parse_command_line

    curve = tmp_path / "ok.csv"
    curve.write_text("0,1\n60,2\n")
    moe = ["--rate-curve", str(curve), "--emulate", "h100-sxm", "--model", "qwen3-30b-a3b", "--dtype", "fp8"]
    args = parse_command_line(_parser(), [*moe, "--replicas", "1", "--dp", "2", "--expert-parallel"])
    launch, describe = _launch(args)
    argv = launch("r0").command()
    assert argv[argv.index("--dp") + 1] == "2" and "--expert-parallel" in argv
    assert describe.endswith("qwen3-30b-a3b fp8 tp=1 dp=2 expert-parallel")
    assert "llama-3.1-8b is dense" in _error(capsys, ["--rate-curve", str(curve), *REPLICA, "--replicas", "1",
                                                       "--dp", "2"])
    assert "--topology runs fixed pools of emulated workers behind a round-robin PD router: --dp/--expert-parallel" \
        in _error(capsys, [*moe, "--topology", "1p1d", "--expert-parallel"])
    assert "--canary-weight with --dp/--expert-parallel" in _error(capsys, [*moe, "--replicas", "1", "--dp", "2",
                                                                            "--canary-weight", "0.1"])


def test_the_pd_router_is_started_with_its_workers_and_refuses_to_add_one():
    """vllm-router's PD mode takes its workers on its command line and adds none while it runs (its
    /add_worker answers 400): a fleet's controller is told so in words, and a killed worker stays lost."""
    from servecap.fleet.router import VllmRouter

    router = VllmRouter("round_robin", pd=(("http://127.0.0.1:1",), ("http://127.0.0.1:2",)))
    argv = router.process.spec.argv
    assert "--vllm-pd-disaggregation" in argv
    assert argv[argv.index("--prefill") + 1] == "http://127.0.0.1:1" and argv[argv.index("--decode") + 1] == \
        "http://127.0.0.1:2"
    with pytest.raises(RuntimeError, match="PD mode adds no worker while it runs"):
        router.add("http://127.0.0.1:3")
