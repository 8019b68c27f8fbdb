"""Locust scenario: streaming chat (or completions) against any OpenAI-compatible server.

    locust -f loadgen/chat.py --host http://127.0.0.1:8000 --headless -u 8 -r 8 -t 60s \
        --prompt-tokens uniform:64:512 --output-tokens 128 --records runs/x/requests.jsonl

Flags (also in the web UI):
  --model NAME               model in requests (default: first id of GET /v1/models)
  --api chat|completions     /v1/chat/completions (default) or /v1/completions
  --prompt-tokens SPEC       N | uniform:LO:HI | normal:MEAN:SD | lognormal:MEAN:SIGMA | file:PATH
  --output-tokens SPEC       max_tokens per request, same forms
  --shared-prefix-tokens N   a common system prompt on top of each prompt (prefix caching)
  --ignore-eos/--no-ignore-eos   send ignore_eos (fixed output lengths; default on)
  --stream/--no-stream       SSE streaming (default on; TTFT/ITL need it)
  --api-key KEY              Authorization: Bearer KEY
  --seed N                   lengths, prompts and arrival times are reproducible per seed
  --records PATH             one JSON line per finished request (DESIGN.md fields), flushed each
  --arrival closed|poisson|constant|gamma:CV   closed = Locust users; else open loop at --rate
  --rate RPS                 open-loop arrival rate for the whole test (all workers together)
  --max-inflight N           open loop: in-flight bound per process (default 1000)
  --request-timeout S        per request (default 600)
  --level ID                 level id in records (default c=<users> or rps=<rate>)
  --warmup S                 records of requests started in the first S s get phase "warmup"

Locust's stats count each finished request once (its path, e.g. /v1/chat/completions, with
E2E as the response time); failures show as "<status>: <message>" (e.g. "http_503:
overloaded"). TTFT, TPOT, ITL (every gap) and E2E have a "Token latency" tab of their own
in the web UI (loadgen/scenario/token_tab.py), a table after the console summary,
PREFIX_tokens.csv with --csv and NAME.tokens.json with --json-file.
Requests still in flight when the test stops are written as status "incomplete".
Distributed runs (--master/--worker) write one records file on the master. Load
shapes: add `-f loadgen/chat.py,loadgen/shapes.py --shape step:1,4,8:30`.

Never import torch here: Locust monkey-patches this process with gevent.
"""

from __future__ import annotations

import copy
import json
import logging
import random

from locust import events

from loadgen.scenario.chat_config import ChatConfig, add_chat_arguments
from loadgen.client.exchange import Exchange
from loadgen.client.http_stream import ConnectionPool, run_exchange
from loadgen.scenario.load_run import Prepared
from loadgen.scenario.run_settings import RunSettings
from loadgen.workload.prompts import PromptBuilder
from loadgen.client.request_bytes import Target, chat_body, completions_body, http_request
from loadgen.scenario.hooks import LoadUser, install  # noqa: F401 - LoadUser: the user class Locust runs

log = logging.getLogger(__name__)


class ChatScenario:
    """Renders one chat/completions request to bytes from a seeded RNG."""

    def __init__(self, config: ChatConfig, target: Target, model: str, seed: int) -> None:
        self.config = config
        self.target = target
        self.model = model
        self.api = config.api
        self.stream = config.stream
        self.path = config.path
        self.prompts = PromptBuilder(config.shared_prefix_tokens, seed)
        self._body = chat_body if config.api == "chat" else completions_body

    def with_target(self, target: Target, model: str) -> "ChatScenario":
        """The same workload sent to another server with its own model name (a compare run's arms)."""
        other = copy.copy(self)
        other.target, other.model = target, model
        return other

    def prepare(self, rng: random.Random) -> Prepared:
        prompt_tokens = self.config.prompt_tokens.sample(rng)
        output_tokens = self.config.output_tokens.sample(rng)
        prompt = self.prompts.build(prompt_tokens, rng)
        body = self._body(self.model, prompt, output_tokens, stream=self.config.stream,
                          ignore_eos=self.config.ignore_eos)
        request = http_request("POST", self.target, self.config.path, body, api_key=self.config.api_key,
                               accept="text/event-stream" if self.config.stream else "application/json")
        return Prepared(request, prompt_tokens + self.config.shared_prefix_tokens, output_tokens)


def discover_model(target: Target, api_key: str | None) -> str:
    """The first model id of GET /v1/models; ValueError saying why when there is none."""
    pool = ConnectionPool(target)
    exchange = Exchange()
    try:
        run_exchange(pool, http_request("GET", target, "/v1/models", api_key=api_key), exchange,
                     stream=False, timeout_s=10.0)
    finally:
        pool.close()
    if exchange.failure or exchange.status_code != 200:
        reason = exchange.failure_message or f"HTTP {exchange.status_code}"
        raise ValueError(f"--model not given and GET {target.base_path}/v1/models failed ({reason}); pass --model")
    try:
        return json.loads(bytes(exchange.body))["data"][0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ValueError("--model not given and GET /v1/models listed no model; pass --model") from None


def build(options, environment, role: str, settings: RunSettings) -> ChatScenario | None:
    config = ChatConfig.from_options(options)
    if role in ("check", "master"):
        return None
    target = Target.from_url(environment.host or "")
    model = config.model or discover_model(target, config.api_key)
    return ChatScenario(config, target, model, settings.seed)


install(events, add_chat_arguments, build)
