"""A scripted OpenAI-compatible SSE server that logs the truth of every response.

Known behaviour, so a client's timing can be checked against it: after reading a whole
request it writes a role-only chunk at once, the first content token after `--ttft`
seconds, then one token every `--itl` seconds until `max_tokens`, then a usage chunk and
`data: [DONE]`. Each response has its own id. For each response the server appends one
line to `--truth` (JSONL) with unix times of when it read the request and when it wrote
each content chunk (taken right after the write), so recorded TTFT/ITL can be matched
request by request through `response_id`. Those times are the process's anchored clock
(loadgen.client.clock: exact differences); `wall_offset_s` is the system clock minus it when
the line was written, so a comparison with the kernel's own timestamps (a packet capture) adds it:
a system clock stepped since the process started (a VM paused and resumed) moves every kernel
time by the step and none of the anchored ones.

    python -m lab.loadgen.scripted_server --port 0 --ttft 0.05 --itl 0.01 --truth truth.jsonl

prints `listening on http://127.0.0.1:PORT` once it accepts connections. `--processes N`
forks N accept loops on one port (SO_REUSEPORT) to feed a fast client. Endpoints:
POST /v1/chat/completions, POST /v1/completions, GET /v1/models, /health, /ready,
/metrics (a few Prometheus lines). `--error-every N` answers every Nth request with
an OpenAI-shaped 503. `--reasoning-tokens N` streams a chat response's first N tokens as
vLLM's reasoning chunks (`delta.reasoning_content`, or `--reasoning-key reasoning`); the truth
line's `answer_index` says which chunk starts the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import socket
import sys
import time
import uuid

from loadgen.client.clock import Clock
from contract.records import RecordWriter

MODEL = "scripted"


class ScriptedServer:
    def __init__(self, ttft_s: float, itl_s: float, truth: RecordWriter | None, error_every: int,
                 usage: bool, reasoning_tokens: int = 0, reasoning_key: str = "reasoning_content") -> None:
        self.ttft_s, self.itl_s, self.truth = ttft_s, itl_s, truth
        self.error_every, self.usage = error_every, usage
        self.reasoning_tokens, self.reasoning_key = reasoning_tokens, reasoning_key
        self.clock = Clock()
        self.counter = itertools.count(1)
        self.nonce = f"{os.getpid():x}{uuid.uuid4().hex[:6]}"
        self.running = 0
        self.served = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:  # keep-alive: one request after another
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        key, value = line.split(":", 1)
                        headers[key.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                t_read = self.clock.now()
                await self.route(method, path, body, t_read, writer)
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def route(self, method: str, path: str, body: bytes, t_read: float, writer) -> None:
        if method == "GET" and path in ("/health", "/ready"):
            return self.send_json(writer, 200, {"status": "ok"})
        if method == "GET" and path == "/v1/models":
            return self.send_json(writer, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if method == "GET" and path == "/metrics":
            text = (f"# TYPE scripted_requests_running gauge\nscripted_requests_running {self.running}\n"
                    f"# TYPE scripted_requests_total counter\nscripted_requests_total {self.served}\n")
            return self.send_raw(writer, 200, "text/plain; version=0.0.4", text.encode())
        if method == "GET" and path.startswith("/v2/models/"):
            return self.send_json(writer, 200, {"name": path.rsplit("/", 1)[-1], "inputs": [
                {"name": "features", "datatype": "FP32", "shape": [-1, 8]}]})
        if method == "POST" and path.startswith("/v2/models/") and path.endswith("/infer"):
            return await self.infer(writer, body, t_read)
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            return self.send_json(writer, 404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}})
        try:
            request = json.loads(body)
            max_tokens = int(request.get("max_tokens") or 16)
        except (ValueError, TypeError, AttributeError):
            return self.send_json(writer, 400, {"error": {"message": "body is not a JSON request", "type": "invalid_request_error"}})
        number = next(self.counter)
        if self.error_every and number % self.error_every == 0:
            return self.send_json(writer, 503, {"error": {"message": "scripted overload", "type": "server_error"}})
        response_id = f"cmpl-{self.nonce}-{number}"
        chat = path.endswith("chat/completions")
        prompt = request.get("messages") if chat else request.get("prompt")
        prompt_tokens = len(json.dumps(prompt).encode())
        self.running += 1
        try:
            if request.get("stream"):
                await self.stream(writer, response_id, chat, max_tokens, prompt_tokens, t_read)
            else:
                await self.whole(writer, response_id, chat, max_tokens, prompt_tokens, t_read)
        finally:
            self.running -= 1
            self.served += 1

    async def stream(self, writer, response_id, chat, max_tokens, prompt_tokens, t_read) -> None:
        loop = asyncio.get_running_loop()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        obj = "chat.completion.chunk" if chat else "text_completion"

        def event(payload: dict) -> bytes:
            data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
            return b"%x\r\n%s\r\n" % (len(data), data)

        base = {"id": response_id, "object": obj, "model": MODEL}
        if chat:
            writer.write(event({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
        chunk_times: list[float] = []
        start = loop.time()
        aborted = False
        try:
            for i in range(max_tokens):
                await asyncio.sleep(max(0.0, start + self.ttft_s + i * self.itl_s - loop.time()))
                piece = "tok " if i else "Hello "
                if chat and i < self.reasoning_tokens:   # vLLM's reasoning chunk: the reasoning key alone
                    choice = {"index": 0, "delta": {self.reasoning_key: piece}}
                else:
                    choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
                writer.write(event({**base, "choices": [choice]}))
                chunk_times.append(self.clock.now())
                if writer.transport.is_closing():
                    aborted = True
                    break
            if not aborted:
                if self.usage:
                    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                             "total_tokens": prompt_tokens + max_tokens}
                    if chat and self.reasoning_tokens:
                        usage["completion_tokens_details"] = {"reasoning_tokens": min(self.reasoning_tokens, max_tokens)}
                    writer.write(event({**base, "choices": [], "usage": usage}))
                data = b"data: [DONE]\n\n"
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
                await writer.drain()
        except ConnectionError:
            aborted = True
        finally:
            self.log(response_id, t_read, chunk_times, max_tokens, prompt_tokens, aborted,
                     answer_index=min(self.reasoning_tokens, max_tokens) if chat else 0)

    async def whole(self, writer, response_id, chat, max_tokens, prompt_tokens, t_read) -> None:
        await asyncio.sleep(self.ttft_s + (max_tokens - 1) * self.itl_s)
        text = "Hello " + "tok " * (max_tokens - 1)
        choice = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0, "text": text}
        payload = {"id": response_id, "object": "chat.completion" if chat else "text_completion", "model": MODEL,
                   "choices": [choice]}
        if self.usage:
            payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                                "total_tokens": prompt_tokens + max_tokens}
        self.send_json(writer, 200, payload)
        self.log(response_id, t_read, [self.clock.now()], max_tokens, prompt_tokens, False)

    async def infer(self, writer, body: bytes, t_read: float) -> None:
        """KServe V2: answer after --ttft with one probability row per input row."""
        try:
            request = json.loads(body)
            rows = int(request["inputs"][0]["shape"][0])
        except (ValueError, KeyError, IndexError, TypeError):
            return self.send_json(writer, 400, {"error": "bad KServe V2 request"})
        await asyncio.sleep(self.ttft_s)
        response_id = request.get("id") or f"infer-{self.nonce}-{next(self.counter)}"
        self.send_json(writer, 200, {"model_name": "scripted", "id": response_id, "outputs": [
            {"name": "probabilities", "shape": [rows, 2], "datatype": "FP32", "data": [0.5] * (2 * rows)}]})
        self.log(response_id, t_read, [self.clock.now()], 0, rows, False)

    def log(self, response_id, t_read, chunk_times, max_tokens, prompt_tokens, aborted, answer_index: int = 0) -> None:
        """answer_index: the first answer chunk's index in t_chunks (after the reasoning chunks)."""
        if self.truth is not None:
            self.truth.write({"id": response_id, "t_read": t_read, "t_chunks": chunk_times,
                              "max_tokens": max_tokens, "prompt_tokens": prompt_tokens, "aborted": aborted,
                              "answer_index": answer_index,
                              "pid": os.getpid(), "wall_offset_s": time.time() - self.clock.now()})

    def send_json(self, writer, code: int, payload: dict) -> None:
        self.send_raw(writer, code, "application/json", json.dumps(payload).encode())

    @staticmethod
    def send_raw(writer, code: int, content_type: str, body: bytes) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}.get(code, "Error")
        writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


def _listening_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    return sock


async def _serve(sock: socket.socket, server: ScriptedServer) -> None:
    srv = await asyncio.start_server(server.handle, sock=sock, backlog=1024)
    async with srv:
        await srv.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.loadgen.scripted_server", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ttft", type=float, default=0.05, help="seconds from reading the request to the first token")
    parser.add_argument("--itl", type=float, default=0.01, help="seconds between tokens")
    parser.add_argument("--truth", default="", help="append one JSONL line per response here")
    parser.add_argument("--error-every", type=int, default=0, help="answer every Nth request with HTTP 503")
    parser.add_argument("--no-usage", action="store_true", help="omit usage (clients must count chunks)")
    parser.add_argument("--processes", type=int, default=1, help="accept loops sharing the port (SO_REUSEPORT)")
    parser.add_argument("--reasoning-tokens", type=int, default=0,
                        help="chat: the first N tokens stream as reasoning (vLLM's delta.reasoning_content chunks)")
    parser.add_argument("--reasoning-key", choices=("reasoning_content", "reasoning"), default="reasoning_content",
                        help="the delta key reasoning streams under (newer vLLM: reasoning)")
    args = parser.parse_args(argv)
    if args.ttft < 0 or args.itl < 0 or args.processes < 1 or args.error_every < 0 or args.reasoning_tokens < 0:
        parser.error("--ttft, --itl, --error-every and --reasoning-tokens must be >= 0 and --processes >= 1")
    sock = _listening_socket(args.port)
    port = sock.getsockname()[1]
    children = []
    for _ in range(args.processes - 1):
        pid = os.fork()
        if pid == 0:
            children = []
            break
        children.append(pid)
    truth = RecordWriter(args.truth) if args.truth else None
    server = ScriptedServer(args.ttft, args.itl, truth, args.error_every, not args.no_usage,
                            args.reasoning_tokens, args.reasoning_key)
    if children or args.processes == 1:
        print(f"listening on http://127.0.0.1:{port}", flush=True)

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        asyncio.run(_serve(sock, server))
    finally:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
