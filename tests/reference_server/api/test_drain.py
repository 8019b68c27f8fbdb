"""SIGTERM drains: new requests get 503, in-flight ones finish within the grace period, the
rest are aborted when it ends, and the process exits 0. One server, two in-flight streams:
a short one that finishes and a long one that cannot."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest

from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec
from waiting import wait_until

pytestmark = pytest.mark.slow

GRACE_S = 6.0


class Stream(threading.Thread):
    """Reads one SSE completion stream to its end; `started` is set at its first event."""

    def __init__(self, url: str, max_tokens: int) -> None:
        super().__init__(daemon=True)
        self.url, self.max_tokens = url, max_tokens
        self.events: list[str] = []
        self.started = threading.Event()

    def run(self) -> None:
        body = {"prompt": "drain", "max_tokens": self.max_tokens, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        with httpx.stream("POST", self.url + "/v1/completions", json=body, timeout=60) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    self.events.append(line[6:])
                    self.started.set()


def test_sigterm_drains_in_flight_refuses_new_aborts_after_grace_and_exits_0():
    args = ["--model", "tiny", "--inject-step-delay-ms", "25", "--drain-grace-s", str(GRACE_S), "--no-classifier"]
    server = ServerProcess(ReferenceServerSpec.from_flags(args)).start()
    try:
        short, long = Stream(server.base_url, 8), Stream(server.base_url, 2000)
        for stream in (short, long):
            stream.start()
            assert stream.started.wait(30)
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()

        wait_until(lambda: httpx.get(server.base_url + "/ready").status_code == 503, what="/ready answering 503 (draining)")
        refused = httpx.post(server.base_url + "/v1/completions", json={"prompt": "late"})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "draining"
        assert refused.headers["Retry-After"] == "1"
        assert httpx.get(server.base_url + "/health").status_code == 200   # alive while draining

        short.join(60)
        long.join(60)
        assert server.process.wait(30) == 0
        assert time.monotonic() - signalled < GRACE_S + 15

        # the short request finished in full
        assert short.events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in short.events[:-1]]
        assert chunks[-1]["usage"]["completion_tokens"] == 8
        assert sum(1 for c in chunks if c["choices"]) == 8
        # the long one was cut at the end of the grace period, told in-band, without [DONE]
        assert "aborted" in json.loads(long.events[-1])["error"]["message"]
        assert len(long.events) < 1000
    finally:
        server.kill()
