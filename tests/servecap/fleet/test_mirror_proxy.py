"""nginx mirroring to a shadow (`servecap.fleet.mirror_proxy`): the split_clients lines for a fraction, the
config, and the real nginx copying requests to a streaming shadow that answers every copy to its end (stored,
never returned), while each client sees production's answer alone and its connection is not held."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from servecap.fleet.mirror_proxy import MirrorProxy, mirror_config, mirror_lines
from servecap.fleet.split_proxy import NGINX


def test_a_fraction_is_a_split_clients_percentage_and_the_config_stores_the_shadows_answers():
    assert mirror_lines(1) == ['* "1";'] and mirror_lines(0.25) == ['25.00% "1";', '* "0";']
    text = mirror_config(8123, Path("/w"), "http://127.0.0.1:9001", "http://127.0.0.1:9002/", 0.5)
    assert "upstream shadow { server 127.0.0.1:9002; keepalive 64; }" in text and "listen unix:/w/shadow.sock;" in text
    assert "mirror /servecap_mirror;" in text and 'if ($servecap_mirror = "0") { return 204; }' in text
    assert "proxy_store /w/answers/$request_id;" in text and "proxy_ignore_headers X-Accel-Buffering;" in text


def _server(name: str, chunks: int, seen: list):
    """Streams `chunks` chunks 20 ms apart (SSE-like, with X-Accel-Buffering: no), naming itself; notes each
    request it finished to its end in `seen`."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("x-servecap-replica", name)
            self.send_header("x-accel-buffering", "no")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for k in range(chunks):
                    self.wfile.write(b"1\r\nx\r\n")
                    self.wfile.flush()
                    if k < chunks - 1:
                        time.sleep(0.02)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                seen.append(name)
            except OSError:   # the proxy left: the request would have been aborted
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.slow
@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (make test installs it as root)")
def test_nginx_mirrors_to_a_streaming_shadow_that_answers_every_copy_to_its_end(tmp_path):
    seen: list[str] = []
    production, production_url = _server("r0", 2, seen)
    shadow, shadow_url = _server("s0", 25, seen)   # half a second of stream: nginx's own mirror would cut it
    try:
        with MirrorProxy(production_url, shadow_url, fraction=1.0, workdir=tmp_path / "proxy") as proxy, \
                httpx.Client(timeout=10) as client:
            waits = []
            for _ in range(6):   # one connection, reused: the shadow's half second must not hold the next request
                started = time.perf_counter()
                response = client.post(proxy.url + "/v1/chat/completions", content=b'{"x": 1}')
                waits.append(time.perf_counter() - started)
                assert response.status_code == 200 and response.headers["x-servecap-replica"] == "r0"
                assert response.content == b"xx"   # production's answer alone reaches the client
            deadline = time.monotonic() + 5
            while seen.count("s0") < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert seen.count("r0") == 6 and seen.count("s0") == 6
            assert max(waits) < 0.3
            answers = sorted(proxy.answers.iterdir())
            assert len(answers) == 6 and all(path.read_bytes() == b"x" * 25 for path in answers)
    finally:
        production.shutdown()
        shadow.shutdown()


@pytest.mark.slow
@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (make test installs it as root)")
def test_a_fraction_copies_that_share_of_the_requests(tmp_path):
    seen: list[str] = []
    production, production_url = _server("r0", 1, seen)
    shadow, shadow_url = _server("s0", 1, seen)
    try:
        with MirrorProxy(production_url, shadow_url, fraction=0.25, workdir=tmp_path / "proxy") as proxy, \
                httpx.Client(timeout=10) as client:
            for _ in range(400):
                client.post(proxy.url + "/x", content=b"{}")
            time.sleep(0.5)
        copies = seen.count("s0")
        assert seen.count("r0") == 400 and abs(copies / 400 - 0.25) < 0.11   # five standard errors of 400 draws
    finally:
        production.shutdown()
        shadow.shutdown()
