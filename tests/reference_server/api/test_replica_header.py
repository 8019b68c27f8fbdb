"""`--replica-name`: every response names its replica in `x-servecap-replica`, streamed or not,
errors too; without the flag there is no such header; a name that cannot be a header value is refused."""

from __future__ import annotations

import pytest

from reference_server.api.replica_header import HEADER
from reference_server.api.settings import ServerConfig
from reference_server.cli import build_parser, configs_from_args
from tiny_app import tiny_app

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_every_response_names_the_replica():
    with tiny_app(max_model_len=64, replica_name="r3") as client:
        body = {"model": "tiny", "prompt": "hi", "max_tokens": 2}
        assert client.post("/v1/completions", json=body).headers[HEADER] == "r3"
        with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as streamed:
            assert streamed.status_code == 200 and streamed.headers[HEADER] == "r3"
            assert b"[DONE]" in b"".join(streamed.iter_bytes())
        refused = client.post("/v1/completions", json={**body, "max_tokens": -1})
        assert refused.status_code == 400 and refused.headers[HEADER] == "r3"
        assert client.get("/health").headers[HEADER] == "r3"


def test_no_name_no_header():
    with tiny_app(max_model_len=64) as client:
        assert HEADER not in client.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 1}).headers


@pytest.mark.parametrize("name", ["", "r 1", "é", "x" * 65])
def test_a_name_that_is_no_header_value_is_refused(name):
    with pytest.raises(ValueError, match="replica_name"):
        ServerConfig(replica_name=name)


def test_the_flag_reaches_the_config():
    _, server, _ = configs_from_args(build_parser().parse_args(["--replica-name", "fleet-r0"]))
    assert server.replica_name == "fleet-r0"
