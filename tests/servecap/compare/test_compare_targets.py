"""compare's arms as targets: what the shared options give each arm, parsed in process (nothing starts)."""

import pytest

from contract.config_file import parse_command_line
from servecap.compare.cli import build_parser, experiment_from_args


def _experiment(*args: str):
    return experiment_from_args(parse_command_line(build_parser(), ["--concurrency", "2", *args]))


def test_arms_of_their_own_take_the_ready_path():
    urls = _experiment("--a-url", "http://127.0.0.1:8000", "--b-url", "http://127.0.0.1:8001", "--ready-path",
                       "/v1/models")
    assert [(t.kind, t.url, t.ready_path) for t in urls.targets] == [
        ("url", "http://127.0.0.1:8000", "/v1/models"), ("url", "http://127.0.0.1:8001", "/v1/models")]
    mixed = _experiment("--a-cmd", "vllm serve tiny --port {port}", "--b-url", "http://127.0.0.1:8001",
                        "--ready-path", "/health")
    assert [(t.kind, t.ready_path) for t in mixed.targets] == [("command", "/health"), ("url", "/health")]


def test_a_ready_path_for_reference_server_arms_is_refused():
    with pytest.raises(ValueError, match="--ready-path is for --server-cmd or --url"):
        _experiment("--a-args", "", "--b-args", "--max-num-seqs 8", "--ready-path", "/v1/models")
