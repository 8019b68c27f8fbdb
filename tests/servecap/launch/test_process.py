"""The one server launcher against real servers: the reference server by its spec (--port 0 and the
ready line), the same server as a plain command (a picked port, GET /ready, a lost port retried),
and the errors for a server that exits or never gets ready."""

from __future__ import annotations

import os
import socket
import sys

import httpx
import pytest

from servecap.launch import process
from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess, ServerStartError
from servecap.launch.spec import ReferenceServerSpec

pytestmark = pytest.mark.slow

TINY = ["--model", "tiny", "--no-classifier"]


def test_reference_server_by_spec_logs_to_the_file_and_drains_on_exit(tmp_path):
    log = tmp_path / "run" / "server-continuous.log"
    spec = ReferenceServerSpec.from_flags([*TINY, "--served-model-name", "spec-tiny"])
    with ServerProcess(spec, log_path=log) as server:
        assert server.command[-len(spec.serve_args()):] == spec.serve_args()
        assert "--port" in server.command and server.command[server.command.index("--port") + 1] == "0"
        assert httpx.get(server.base_url + "/v1/models").json()["data"][0]["id"] == "spec-tiny"
        assert server.base_url.startswith("http://127.0.0.1:") and not server.base_url.endswith(":0")
        pid = server.pid
    assert server.process.returncode == 0   # SIGTERM drained, not killed
    text = log.read_text()
    assert f"servecap serve: ready on {server.base_url} (strategy=continuous, model=spec-tiny" in text
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_reference_server_as_a_plain_command_retries_a_port_taken_before_its_bind(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = taken.getsockname()[1]
        picks = iter([taken_port])
        real_free_port = process.free_port
        monkeypatch.setattr(process, "free_port", lambda: next(picks, None) or real_free_port())
        spec = CommandSpec((sys.executable, "-m", "reference_server", "--port", "{port}", *TINY), ready_path="/ready")
        with ServerProcess(spec) as server:
            port = int(server.base_url.rsplit(":", 1)[1])
            assert port != taken_port and server.command[4] == str(port)
            assert httpx.get(server.base_url + "/ready").status_code == 200
            assert "Address already in use" not in server.output()   # the output of this (second) start only
        assert server.process.returncode == 0


def test_a_server_that_exits_before_ready_names_its_exit_code_and_quotes_its_log(tmp_path):
    log = tmp_path / "server.log"
    with pytest.raises(ServerStartError) as exc:
        with ServerProcess(ReferenceServerSpec.from_flags(["--max-num-seqs", "0"]), log_path=log):
            pass
    message = str(exc.value)
    assert message.startswith(f"reference server exited with code 2 before it was ready (log: {log})")
    assert "max_num_seqs must be a positive integer, got 0" in message


def test_a_server_that_never_gets_ready_is_stopped_and_its_output_quoted():
    never = CommandSpec((sys.executable, "-c", "import sys, time; print('booting on', sys.argv[1], flush=True); "
                                               "time.sleep(120)", "{port}"))
    server = ServerProcess(never, startup_timeout_s=1.0)
    with pytest.raises(ServerStartError, match=r"python\S* not ready after 1 s:\nbooting on \d+"):
        server.start()
    assert server.process.poll() is not None
    server.close()


def test_a_command_must_say_where_its_port_goes():
    with pytest.raises(ValueError, match=r"must say where its port goes with \{port\}"):
        CommandSpec(("vllm", "serve", "--port", "8000"))
    with pytest.raises(ValueError, match="--ready-path must start with '/'"):
        CommandSpec(("server", "{port}"), ready_path="ready")
