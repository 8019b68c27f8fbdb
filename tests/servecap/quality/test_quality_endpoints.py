"""`servecap quality` against live endpoints: the real reference server over HTTP."""

from __future__ import annotations

import pytest

from servecap.quality.cli import main, seeded_prompts
from servecap.quality.endpoints import Endpoint, compare_endpoints

pytestmark = pytest.mark.slow


def test_one_server_against_itself_agrees_everywhere_compared_as_token_ids(reference_server_tiny):
    endpoint = Endpoint(reference_server_tiny.base_url, "tiny")
    result = compare_endpoints(endpoint, endpoint, seeded_prompts(4, 16, seed=0), 8)
    assert result["compared_as"] == ["token ids"]
    assert result["measures"]["prefix_agreement"]["mean"] == 1.0 and result["measures"]["identical_outputs"] == 1.0
    assert result["measures"]["kl_mean"]["n"] == 0   # no logprobs asked: not measured


def test_an_endpoint_refusing_logprobs_is_one_line_and_exit_1(reference_server_tiny, capsys):
    url = reference_server_tiny.base_url
    assert main(["--a-url", url, "--b-url", url, "--logprobs", "3", "--prompts", "1"]) == 1
    err = capsys.readouterr().err
    assert "answered 400" in err and "logprobs" in err and "Traceback" not in err
