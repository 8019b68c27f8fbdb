"""Baseline for the accuracy benchmark: stock Locust `HttpUser` + `iter_lines`, timed the usual way.

    python -m lab.loadgen.accuracy_bench --client stock

What most Locust LLM scripts do: `t_start = time.perf_counter()` then
`self.client.post(..., json=body, stream=True)` (requests builds, encodes and sends the
request after the timestamp) and `iter_lines()` over the chunked SSE body. Writes the
same records as chat.py (only the fields the benchmark reads are meaningful), so
`accuracy.compare` scores both clients against the same scripted server.
"""

from __future__ import annotations

import os
import random
import time

import gevent
from locust import HttpUser, constant, events, task

from loadgen.client.clock import Clock
from loadgen.client.exchange import Exchange, summarize
from loadgen.workload.prompts import PromptBuilder
from contract.records import Record, RecordWriter

_writer: RecordWriter | None = None
_clock = Clock()


@events.init_command_line_parser.add_listener
def _args(parser, **_) -> None:
    parser.add_argument("--records", default="")
    parser.add_argument("--output-tokens", default="64")
    parser.add_argument("--level", default="")
    parser.add_argument("--warmup", default=0.0, type=float)


@events.test_start.add_listener
def _open(environment, **_) -> None:
    global _writer
    gevent.get_hub().loop.update_now()  # same stale-clock fix as chat.py, for an equal --run-time
    _writer = RecordWriter(environment.parsed_options.records)


class StockChatUser(HttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.rng = random.Random(os.getpid() ^ id(self))
        self.prompts = PromptBuilder(0)
        self.started = time.perf_counter()

    @task
    def chat(self) -> None:
        options = self.environment.parsed_options
        prompt = self.prompts.build(64, self.rng)
        body = {"model": "scripted", "messages": [{"role": "user", "content": prompt.user}],
                "max_tokens": int(options.output_tokens), "stream": True,
                "stream_options": {"include_usage": True}}
        exchange = Exchange()
        exchange.t_start = time.perf_counter()
        with self.client.post("/v1/chat/completions", json=body, stream=True, catch_response=True,
                              name="stock") as response:
            exchange.status_code = response.status_code
            for line in response.iter_lines():
                now = time.perf_counter()
                exchange.lines.append((now, line + b"\n"))
                exchange.t_last = now
            exchange.complete = True
        outcome = summarize(exchange, stream=True, prompt_tokens_asked=64)
        phase = "warmup" if exchange.t_start - self.started < options.warmup else "measure"
        _writer.write(Record(level=options.level, phase=phase, t_start=_clock.unix(exchange.t_start),
                             ttft_s=outcome.ttft_s, e2e_s=outcome.e2e_s, itl_s=outcome.itl_s,
                             prompt_tokens=outcome.prompt_tokens, output_tokens=outcome.output_tokens,
                             status=outcome.status, error=outcome.error, worker=f"stock@{os.getpid()}",
                             response_id=outcome.response_id))
