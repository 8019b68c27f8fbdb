"""Locust scenario: streaming chat (or completions) against any OpenAI-compatible server.

    locust -f loadgen/chat.py --host http://127.0.0.1:8000 --headless -u 8 -r 8 -t 60s \
        --prompt-tokens uniform:64:512 --output-tokens 128 --records runs/x/requests.jsonl

Flags (also in the web UI):
  (the workload's options are contract.workload's, the same for every servecap command)
  --model NAME               model in requests (default: first id of GET /v1/models)
  --model-mix MIX            each request's model: NAME:WEIGHT,... ('base' = --model) or zipf:N[:S] (lora-1..N)
  --api chat|completions     /v1/chat/completions (default) or /v1/completions
  --prompt-tokens SPEC       N | uniform:LO:HI | normal:MEAN:SD | lognormal:MEAN:SIGMA | file:PATH
                             (default uniform:32:128)
  --output-tokens SPEC       max_tokens per request, same forms (default uniform:16:64; with --dataset or
                             --trace the data's lengths)
  --reasoning-tokens SPEC    a reasoning budget per request, of its max_tokens (sent as reasoning_tokens, the
                             reference server's extension); a dataset's replies that carry reasoning give theirs
  --dataset PATH             prompts from a local file: ShareGPT JSON, OpenAI chat JSONL, prompt JSONL
                             (loadgen/workload/datasets.py); output lengths from the data's replies
  --dataset-sampling with-replacement|without-replacement   seeded either way
  --chars-per-token X        dataset lengths are estimated as UTF-8 bytes / X (default 4; 1 = byte tokenizer)
  --turns N|all              multi-turn conversations (closed loop): each turn sends the whole history with
                             the server's own answers; with --dataset, N caps each conversation's turns
                             ('all': every turn it has); records carry conversation_id and turn
  --think-time S             multi-turn: pause between an answer and the next turn
  --session SPEC             agentic sessions (closed loop): turns:N,tools:LO-HI,tool-latency:DIST,
                             tool-result:LENGTH,fanout:LO-HI,schemas:N (contract/agent_session.py): each turn
                             sends the whole history with tools offered, asks LO-HI tool calls
                             (tool_choice "required"), waits each tool's latency, sends the results back
                             (fanout: sub-agents, in parallel, instead of the first tool), then asks the answer;
                             records carry conversation_id, turn, step, agent, tool_calls, tool_wait_s
  --trace PATH               replay a trace open loop at its times, with its lengths: Azure CSV (TIMESTAMP,
                             ContextTokens, GeneratedTokens), Mooncake JSONL (timestamp in ms, input_length,
                             output_length, hash_ids: shared ids give shared prompt prefixes; AIPerf's
                             session_id and delay: a session's later turn is sent its delay after the
                             previous answer) or BurstGPT CSV
                             (Timestamp, Request tokens, Response tokens); the test ends
                             when the trace does (or at -t); level id "trace"
  --speedup X                divide the trace's times by X (also spelled --trace-speedup)
  --trace-block-tokens N     tokens per Mooncake hash id (default 512)
  --shared-prefix-tokens N   a common system prompt on top of each prompt (prefix caching)
  --session-header NAME      the header that carries a request's session (a --turns conversation, a --session
                             agent, a trace's session_id or user; default x-session-id, which vllm-router's
                             consistent_hash and sticky_least_loaded read; 'none' sends none)
  --ignore-eos/--no-ignore-eos   send ignore_eos (fixed output lengths; default on)
  --stream/--no-stream       SSE streaming (default on; TTFT/ITL need it)
  --api-key KEY              Authorization: Bearer KEY
  --seed N                   lengths, prompts and arrival times are reproducible per seed
  --records PATH             one JSON line per finished request (DESIGN.md fields), flushed each
  --rates RPS                an open loop at this rate for the whole test (all workers together);
                             without it, Locust's users are a closed loop
  --arrival poisson|constant|gamma:CV   the open loop's arrivals (default poisson)
  --max-inflight N           open loop: in-flight bound per process (default 1000)
  --request-timeout S        per request (default 600)
  --level ID                 level id in records (default c=<users> or rps=<rate>)
  --warmup S                 records of requests started in the first S (10, 5s, 500ms; default 5s) get
                             phase "warmup"

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
from loadgen.scenario.load_run import process_share
from loadgen.scenario.route import Prepared
from loadgen.scenario.run_settings import RunSettings
from loadgen.scenario.session_loop import SessionRequests
from loadgen.workload.agent_sessions import DEFAULT_SYSTEM, new_session
from loadgen.workload.conversations import ConversationHistory, ConversationPlan
from loadgen.workload.datasets import DatasetSampler, conversation_plan, estimate_tokens, load_dataset
from loadgen.workload.prompts import Prompt, PromptBuilder, ascii_text
from loadgen.workload.traces import Trace, TracePrompts, load_trace
from loadgen.client.request_bytes import (Target, chat_body, chat_messages_body, completions_body, http_request,
                                          session_header_value)
from loadgen.scenario.hooks import LoadUser, install  # noqa: F401 - LoadUser: the user class Locust runs

log = logging.getLogger(__name__)


class ChatScenario:
    """Renders one chat/completions request to bytes from a seeded RNG."""

    def __init__(self, config: ChatConfig, target: Target, model: str, seed: int,
                 dataset: DatasetSampler | None = None, trace: Trace | None = None) -> None:
        self.config = config
        self.target = target
        self.model = model
        self.api = config.api
        self.stream = config.stream
        self.path = config.path
        self.prompts = PromptBuilder(config.shared_prefix_tokens, seed)
        self.dataset = dataset
        self.trace = TraceReplay(self, trace, seed) if trace is not None else None
        self._body = chat_body if config.api == "chat" else completions_body

    def with_target(self, target: Target, model: str) -> "ChatScenario":
        """The same workload sent to another server with its own model name (a compare run's arms)."""
        other = copy.copy(self)
        other.target, other.model = target, model
        return other

    @property
    def multi_turn(self) -> bool:
        return self.config.multi_turn

    def prepare(self, rng: random.Random) -> Prepared:
        if self.dataset is not None:
            return self.conversation(rng).prepare(0)
        prompt_tokens = self.config.prompt_tokens.sample(rng)
        output_tokens = self.config.output_tokens.sample(rng)
        prompt = self.prompts.build(prompt_tokens, rng)
        model = self.pick_model(rng)
        reasoning = self.reasoning_budget(rng, output_tokens)
        body = self._body(model, prompt, output_tokens, stream=self.config.stream,
                          ignore_eos=self.config.ignore_eos, reasoning_tokens=reasoning)
        return Prepared(self._http(body), prompt_tokens + self.config.shared_prefix_tokens, output_tokens,
                        model=self.recorded_model(model))

    def pick_model(self, rng: random.Random) -> str:
        """This request's model: --model-mix's draw, else the one model (drawn after the lengths, so a mix
        leaves the run's sequence of lengths as it was)."""
        mix = self.config.model_mix
        return self.model if mix is None else mix.pick(rng, base=self.model)

    def reasoning_budget(self, rng: random.Random, output_tokens: int, data: int | None = None) -> int | None:
        """This request's reasoning budget: the data's, else --reasoning-tokens' draw (drawn last, so a
        budget leaves the run's lengths and models as they were), capped at its output; None: none asked."""
        if data is None and self.config.reasoning_tokens is None:
            return None
        budget = data if data is not None else self.config.reasoning_tokens.sample(rng)
        return min(budget, output_tokens)

    def recorded_model(self, model: str) -> str | None:
        """The record's `model`: set only in a --model-mix run."""
        return model if self.config.model_mix is not None else None

    def conversation(self, rng: random.Random, conversation_id: str | None = None) -> "ChatConversation":
        """The next conversation: a dataset entry's turns, or --turns synthetic user turns of --prompt-tokens."""
        config = self.config
        if self.dataset is not None:
            plan = conversation_plan(self.dataset.pick(rng), config.turns, config.chars_per_token,
                                     self.prompts.shared_prefix)
            return ChatConversation(self, plan, rng, config.chars_per_token, conversation_id)
        users = tuple(ascii_text(config.prompt_tokens.sample(rng), rng) for _ in range(config.turns))
        plan = ConversationPlan(users, (None,) * len(users), self.prompts.shared_prefix)
        return ChatConversation(self, plan, rng, 1.0, conversation_id)   # synthetic text: one byte, one token

    @property
    def agentic(self) -> bool:
        return self.config.session is not None

    def agent_session(self, rng: random.Random, session_id: str) -> SessionRequests:
        """The next --session session: its user turns of --prompt-tokens, its tools, the shared prefix (if
        any) after the agent's system prompt."""
        shared = self.prompts.shared_prefix
        session = new_session(self.config.session, rng, self.config.prompt_tokens, session_id,
                              system=f"{DEFAULT_SYSTEM}\n{shared}" if shared else None)
        return SessionRequests(self, session)

    def render(self, messages: list[dict], output_tokens: int, model: str | None = None,
               reasoning_tokens: int | None = None, tools: list[dict] | None = None,
               tool_choice: str | None = None, ignore_eos: bool | None = None, session: str | None = None) -> bytes:
        """The request's bytes; `session`: the key of the session it belongs to, sent as --session-header."""
        options = dict(stream=self.config.stream,
                       ignore_eos=self.config.ignore_eos if ignore_eos is None else ignore_eos)
        headers = ({self.config.session_header: session_header_value(session)}
                   if session and self.config.session_header else None)
        model = model or self.model
        if self.api == "chat":
            return self._http(chat_messages_body(model, messages, output_tokens, reasoning_tokens=reasoning_tokens,
                                                 tools=tools, tool_choice=tool_choice, **options), headers)
        text = "\n".join(message["content"] for message in messages)
        return self._http(completions_body(model, Prompt(None, text), output_tokens, **options), headers)

    def _http(self, body: dict, headers: dict[str, str] | None = None) -> bytes:
        return http_request("POST", self.target, self.config.path, body, api_key=self.config.api_key,
                            accept="text/event-stream" if self.config.stream else "application/json",
                            headers=headers)


class TraceReplay:
    """A trace's schedule and its rows as requests (LoadRun sends row i at offset i)."""

    def __init__(self, scenario: ChatScenario, trace: Trace, seed: int) -> None:
        self.scenario, self.trace = scenario, trace
        self.prompts = TracePrompts(seed, scenario.config.trace_block_tokens)

    def offsets(self) -> list[float]:
        return self.trace.offsets(self.scenario.config.trace_speedup)

    def prepare(self, index: int, rng: random.Random, turn: int | None = None) -> Prepared:
        """Row `index` as a request; `turn`: its place in its session (a trace of sessions)."""
        config, row = self.scenario.config, self.trace.rows[index]
        output_tokens = config.output_tokens.sample(rng) if config.output_tokens_given else row.output_tokens
        shared = self.scenario.prompts.shared_prefix
        messages = ([{"role": "system", "content": shared}] if shared else []) + [
            {"role": "user", "content": self.prompts.text(index, row)}]
        model = self.scenario.pick_model(rng)
        reasoning = self.scenario.reasoning_budget(rng, output_tokens)
        return Prepared(self.scenario.render(messages, output_tokens, model, reasoning, session=row.key or None),
                        row.input_tokens + config.shared_prefix_tokens, output_tokens,
                        model=self.scenario.recorded_model(model),
                        conversation_id=row.session or None if turn is not None else None, turn=turn)


class ChatConversation:
    """One conversation's turns, in order: each `prepare(turn)` sends the history so far, `answered(text)`
    adds the server's answer to it."""

    def __init__(self, scenario: ChatScenario, plan: ConversationPlan, rng: random.Random, chars_per_token: float,
                 conversation_id: str | None) -> None:
        self.scenario, self.rng, self.chars_per_token = scenario, rng, chars_per_token
        self.history = ConversationHistory(plan)
        self.conversation_id = conversation_id
        self.turns = plan.turns
        self.think_time_s = scenario.config.think_time_s
        self.model = scenario.pick_model(rng)   # a conversation keeps its model (its tenant's adapter), drawn
                                                # before its turns' lengths: a mix moves a conversation's lengths

    def prepare(self, turn: int) -> Prepared:
        config = self.scenario.config
        data_length = self.history.plan.output_tokens[turn]
        # --output-tokens given: it wins; else the data's own length, else the default
        output_tokens = (data_length if data_length is not None and not config.output_tokens_given
                         else config.output_tokens.sample(self.rng))
        messages = self.history.messages(turn)
        prompt_tokens = sum(estimate_tokens(m["content"], self.chars_per_token) for m in messages)
        reasoning = self.scenario.reasoning_budget(self.rng, output_tokens, self.history.plan.reasoning_at(turn))
        return Prepared(self.scenario.render(messages, output_tokens, self.model, reasoning,
                                             session=self.conversation_id), prompt_tokens, output_tokens,
                        conversation_id=self.conversation_id, turn=turn + 1 if self.conversation_id else None,
                        model=self.scenario.recorded_model(self.model))

    def answered(self, text: str) -> None:
        self.history.answered(text)


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
    if config.multi_turn and settings.arrival.open_loop:
        raise ValueError("--turns: multi-turn conversations run closed loop (no --rates)")
    if config.session is not None and settings.arrival.open_loop:
        raise ValueError("--session: a session's next request follows its last answer and its tools: it runs "
                         "closed loop (no --rates)")
    dataset = load_dataset(config.dataset) if config.dataset else None   # a bad file fails at init, naming the line
    trace = load_trace(config.trace) if config.trace else None
    if trace is not None and (settings.arrival.open_loop or settings.slice_plan is not None):
        raise ValueError("--trace sets the send times itself: no --rates, no compare run")
    if role in ("check", "master"):
        return None
    target = Target.from_url(environment.host or "")
    model = config.model or discover_model(target, config.api_key)
    sampler = None
    if dataset is not None:
        index, processes = process_share(environment, role)
        sampler = DatasetSampler(dataset, seed=settings.seed, sampling=config.dataset_sampling,
                                 process_index=index, process_count=processes)
        log.info("dataset %s: %d conversations (%s), %d skipped without a user turn", dataset.path,
                 len(dataset.conversations), dataset.format, dataset.skipped)
    return ChatScenario(config, target, model, settings.seed, sampler, trace)


install(events, add_chat_arguments, build)
