"""nginx in front of two versions (`servecap.fleet.split_proxy`): the split_clients lines for a weight, the
config, and the real nginx splitting by weight, naming each answer's version, streaming unbuffered and
taking a new weight on reload."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from servecap.fleet.split_proxy import NGINX, SplitProxy, config_text, split_lines


def test_a_weight_is_a_split_clients_percentage_and_the_ends_send_everything_to_one_version():
    assert split_lines(0.1) == ["10.00% canary;", "* primary;"]
    assert split_lines(0.0525) == ["5.25% canary;", "* primary;"]
    assert split_lines(0) == ["* primary;"] and split_lines(0.00001) == ["* primary;"]
    assert split_lines(1) == ["* canary;"]
    text = config_text(8123, "http://127.0.0.1:9001", "http://127.0.0.1:9002/", 0.25, Path("/w"))
    assert "listen 127.0.0.1:8123;" in text and "upstream canary { server 127.0.0.1:9002; keepalive 64; }" in text
    assert 'split_clients "${request_id}" $servecap_version {' in text and "25.00% canary;" in text
    assert "proxy_buffering off;" in text and "pid /w/nginx.pid;" in text


def _server(name: str | None):
    """A server that answers "ab" (GET /slow: streams "a", waits 0.3 s, then "b"); names itself in
    x-servecap-replica if `name`."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True   # the headers and the body are two writes

        def do_GET(self):
            self.send_response(200)
            if name:
                self.send_header("x-servecap-replica", name)
            if self.path != "/slow":
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ab")
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for part, pause in ((b"a", 0.3), (b"b", 0.0)):
                self.wfile.write(b"1\r\n" + part + b"\r\n")
                self.wfile.flush()
                time.sleep(pause)
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.slow
@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (make test installs it as root)")
def test_nginx_splits_by_weight_names_the_version_streams_and_reloads_a_new_weight(tmp_path):
    primary, primary_url = _server(None)
    canary, canary_url = _server("c0")
    try:
        with SplitProxy(primary_url, canary_url, weight=0.1, workdir=tmp_path / "proxy") as proxy, \
                httpx.Client(timeout=10) as client:
            seen = Counter(client.get(proxy.url + "/x").headers["x-servecap-replica"] for _ in range(2000))
            assert set(seen) == {"primary/", "canary/c0"}
            assert abs(seen["canary/c0"] / 2000 - 0.1) < 0.035   # five standard errors of 2,000 draws
            with client.stream("GET", proxy.url + "/slow") as response:   # the first chunk before the pause ends
                started = time.perf_counter()
                first = next(response.iter_raw())
                assert first.startswith(b"a") and time.perf_counter() - started < 0.25
            proxy.set_weight(1.0)
            deadline = time.monotonic() + 10
            # the reload's new workers take the next requests; the old ones close their idle keep-alive
            # connections (a client resends on a fresh one, as the load generator does): new connections here
            while time.monotonic() < deadline:
                if all(httpx.get(proxy.url + "/x").headers["x-servecap-replica"] == "canary/c0" for _ in range(20)):
                    break
                time.sleep(0.1)
            else:
                pytest.fail("nginx still sent requests to the primary 10 s after a reload to weight 1")
            assert (tmp_path / "proxy" / "access.log").stat().st_size > 0
    finally:
        primary.shutdown()
        canary.shutdown()
