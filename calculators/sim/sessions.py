"""Agentic sessions in the simulator (`--session`, contract.agent_session): the load generator's sessions,
request for request, on the engine's own scheduler and prefix cache.

`concurrency` users each run one session after another, as the load generator's users do
(loadgen.scenario.session_loop). A session's requests carry token ids, so the engine's block manager
finds what a returning request shares with what it computed before:

    every request       the shared prefix: the agent's system prompt and the tool schemas, the same ids
                        for every session (`SessionSpec.prefix_tokens` of them)
    a main request      the session's history so far, as the engine last held it (the previous request's
                        prompt and the tokens it generated), then what is new: the turn's user message, or
                        the tool's result (`tool-result` tokens), or the joined sub-agents' answers
    a sub-agent         the shared prefix and a task of its own (`--prompt-tokens`)

A tool round generates `call_tokens` (its call's text), of which the client sees nothing before the
call's name is whole (CALL_NAME_TOKENS: its first token, as the load generator times it, is that one); the
turn's answer and a sub-agent their drawn lengths. With `answers_cached` (a served model whose text
re-tokenizes to the ids it generated, as a real model's mostly does) the next request's history holds
what the engine generated, so its blocks hit; without it (the reference server's seeded random weights:
the text it sends is not what its tokenizer reads back) an answer comes back as new tokens. After a tool round the next request is sent when the tool's latency has passed (a draw), or
when the round's sub-agents have all answered; after an answer, the think time; after the session's
last answer the user starts a new session. The front end (`FrontEnd`) adds each request's delays as
it does for any closed loop. Whether a returning request finds its history in the cache is the
block manager's answer: the cache's real capacity and its eviction order (the oldest-freed block is
reused first) decide it.

Each request's place (session, turn, step, agent) is kept in `SessionLog`, so the summary can give
TTFT per turn, each turn's prefix-cache share and whole sessions' completion times.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from calculators.sim.front_end import FrontEnd
from calculators.sim.sim_engine import SIM_TOKEN, run_engine
from calculators.sim.simulate import EmptyWindow, measured_window, result_of
from calculators.sim.state import StepClock, Trace
from contract.agent_session import CALL_NAME_TOKENS, SessionSpec
from contract.distributions import LengthDistribution

SHARED_BASE = -1     # the shared prefix's ids: -1, -2, ...; a session's own new tokens count up from 2


@dataclass
class SessionLog:
    """Per request: its session number, turn (1-based), step in the turn (1-based), agent (0: main,
    k: sub-agent k), whether it ends its session, and its prefix-cache hits (tokens)."""

    session: list[int] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    agent: list[int] = field(default_factory=list)
    last: list[bool] = field(default_factory=list)
    tool_round: list[bool] = field(default_factory=list)       # a main request that asks a call
    started: dict[int, float] = field(default_factory=dict)    # session -> its first request's client send
    completed: dict[int, float] = field(default_factory=dict)  # session -> its last turn's answer at the client


class _Session:
    def __init__(self, number: int, spec: SessionSpec, rng: random.Random) -> None:
        self.number, self.spec, self.rng = number, spec, rng
        self.history: list[int] = []     # the session's own ids (after the shared prefix), as last held
        self.last_sent: list[int] = []   # the history its main request in flight was sent with
        self.turn = 0
        self.rounds = self.fanout = 0
        self.step = 0
        self.waiting_subs = 0
        self.sub_tokens = 0
        self.next_id = 2 + number * 10_000_000   # this session's own token ids


class SessionArrivals:
    """The `Arrivals` interface (`next_time`, `pop_until`, `finished`, `sent`) for sessions: each send
    fills the request's prompt ids, lengths and place in the trace when it is made."""

    def __init__(self, trace: Trace, spec: SessionSpec, *, concurrency: int, prompt_tokens: LengthDistribution,
                 output_tokens: LengthDistribution, think_s: float = 0.0, front_end: FrontEnd | None = None,
                 seed: int = 0, answers_cached: bool = True) -> None:
        self.trace, self.spec = trace, spec
        self.answers_cached = answers_cached
        self.n = len(trace.prompt)
        trace.token_ids = [None] * self.n
        self.prompt_tokens, self.output_tokens = prompt_tokens, output_tokens
        self.think_s = think_s
        front = front_end or FrontEnd.none()
        self.delays = front.draw(np.random.default_rng([seed, 1]), self.n)
        self.first_users = min(concurrency, self.n) if front.served else self.n
        self.seed = seed
        self.shared = [SHARED_BASE - k for k in range(spec.prefix_tokens)]
        self.log = SessionLog()
        self.heap: list[tuple[float, float, int, tuple]] = []   # (engine arrival, client send, draw, request)
        self.pushes = self.sent = self.sessions = 0
        self.owner: list[_Session | None] = [None] * self.n
        for _ in range(min(concurrency, self.n)):
            self._begin_session(0.0)

    # -- the Arrivals interface --------------------------------------------------------
    def next_time(self) -> float | None:
        if self.sent >= self.n or not self.heap:
            return None
        return self.heap[0][0]

    def pop_until(self, now: float, arrived: list[int]) -> None:
        trace = self.trace
        while self.sent < self.n and self.heap:
            reach, send, draw, request = self.heap[0]
            if reach > now or (reach == now and draw >= self.first_users):
                return
            heapq.heappop(self.heap)
            i = self.sent
            session, ids, output, (turn, step, agent, last, tool_round) = request
            trace.token_ids[i] = ids
            trace.prompt[i], trace.output[i] = len(ids), output
            trace.reasoning[i] = CALL_NAME_TOKENS - 1 if tool_round else 0   # a call shows at its name's end
            trace.arrival[i], trace.client_send[i] = reach, send
            trace.first_out[i], trace.last_out[i] = self.delays[1][draw], self.delays[2][draw]
            self.owner[i] = session
            log = self.log
            log.session.append(session.number)
            log.turn.append(turn)
            log.step.append(step)
            log.agent.append(agent)
            log.last.append(last)
            log.tool_round.append(tool_round)
            log.started.setdefault(session.number, send)
            arrived.append(i)
            self.sent += 1

    def finished(self, i: int, when: float) -> None:
        """Request `i` left the engine at `when`: what its session does next."""
        session = self.owner[i]
        self.owner[i] = None
        back = when + float(self.trace.last_out[i])   # the answer at the client
        agent = self.log.agent[i]
        if agent:   # a sub-agent: the round goes on when all of them have answered
            session.waiting_subs -= 1
            session.sub_tokens += int(self.trace.output[i])
            if session.waiting_subs == 0:
                self._new_tokens(session, session.sub_tokens)
                self._send_main(session, back)
            return
        # the history as the engine held it: what was sent, then what it generated (or, when the text does not
        # read back as those ids, as many new tokens)
        generated = int(self.trace.output[i])
        session.history = session.last_sent + ([SIM_TOKEN] * generated if self.answers_cached
                                               else self._fresh(session, generated))
        if session.step <= session.rounds:   # a tool round's call came back
            if session.step == 1 and session.fanout:
                session.waiting_subs, session.sub_tokens = session.fanout, 0
                for k in range(session.fanout):
                    task = self.prompt_tokens.sample(session.rng)
                    ids = self.shared + self._fresh(session, task)
                    self._push(session, back, ids, self.spec.tool_result.sample(session.rng),
                               (session.turn, session.step, k + 1, False, False))
                return
            self._new_tokens(session, self.spec.tool_result.sample(session.rng))
            self._send_main(session, back + self.spec.tool_latency.sample(session.rng))
            return
        if session.turn < self.spec.turns:   # the turn's answer
            self._begin_turn(session, back + self.think_s)
            return
        self.log.completed[session.number] = back
        if self.pushes < self.n:
            self._begin_session(back)

    @property
    def exhausted(self) -> bool:
        return self.sent >= self.n

    # -- sessions ----------------------------------------------------------------------
    def _begin_session(self, at: float) -> None:
        number = self.sessions
        self.sessions += 1
        session = _Session(number, self.spec, random.Random(f"{self.seed}/session/{number}"))
        self._begin_turn(session, at)

    def _begin_turn(self, session: _Session, at: float) -> None:
        session.turn += 1
        plan = self.spec.draw_turn(session.rng)
        session.rounds, session.fanout, session.step = plan.tool_rounds, plan.fanout, 0
        self._new_tokens(session, self.prompt_tokens.sample(session.rng))
        self._send_main(session, at)

    def _send_main(self, session: _Session, at: float) -> None:
        session.step += 1
        final = session.step > session.rounds
        output = self.output_tokens.sample(session.rng) if final else self.spec.call_tokens
        last = final and session.turn == self.spec.turns
        session.last_sent = session.history
        self._push(session, at, self.shared + session.history, output,
                   (session.turn, session.step, 0, last, not final))

    def _new_tokens(self, session: _Session, count: int) -> None:
        session.history = session.history + self._fresh(session, count)

    @staticmethod
    def _fresh(session: _Session, count: int) -> list[int]:
        start = session.next_id
        session.next_id += count
        return list(range(start, start + count))

    def _push(self, session: _Session, client_send: float, ids: list[int], output: int, where: tuple) -> None:
        if self.pushes >= self.n:
            return
        draw = self.pushes
        self.pushes += 1
        heapq.heappush(self.heap, (client_send + float(self.delays[0][draw]), client_send, draw,
                                   (session, ids, output, where)))


def longest_context(spec: SessionSpec, prompt: LengthDistribution, output: LengthDistribution) -> int:
    """A bound on a session's last request, prompt and output (it sizes an unset cache): every turn with
    its most tool rounds and sub-agents, each length at the largest of 4,096 seeded draws."""
    def high(dist: LengthDistribution) -> int:
        return int(dist.sample_array(np.random.default_rng(0), 4096).max())

    result = high(spec.tool_result) * max(spec.fanout[1], 1)
    per_turn = high(prompt) + spec.tools[1] * (spec.call_tokens + result) + high(output)
    return spec.prefix_tokens + spec.turns * per_turn


@dataclass(frozen=True)
class TurnPrediction:
    requests: int
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    prompt_tokens_mean: float | None
    cached_share: float | None       # of the turn's prompt tokens, prefix-cache hits


@dataclass(frozen=True)
class SessionsPrediction:
    """One level of sessions: the measure window's requests as `SimResult`, and the sessions whole."""

    result: object                   # calculators.sim.simulate.SimResult over every request in the window
    by_turn: dict[int, TurnPrediction]   # the main agent's requests
    sessions_completed: int
    completion_p50_s: float | None
    completion_p99_s: float | None
    tool_rounds: int                 # main-agent tool rounds in the window

    def to_dict(self) -> dict:
        return {"result": self.result.to_dict(), "by_turn": {str(k): asdict(v) for k, v in self.by_turn.items()},
                "sessions_completed": self.sessions_completed, "completion_p50_s": self.completion_p50_s,
                "completion_p99_s": self.completion_p99_s, "tool_rounds": self.tool_rounds}


def simulate_sessions(server, workload, step_model, spec: SessionSpec, front_end: FrontEnd | None = None,
                      think_s: float = 0.0, *, answers_cached: bool = True,
                      fast_decodes: bool = True) -> SessionsPrediction:
    """`workload.concurrency` users running sessions, measured in the workload's time window (a load test's
    warm-up and duration: a request counts when it was sent after the warm-up and answered by the end; a
    session when it began after the warm-up and its last answer came by the end)."""
    if workload.concurrency is None or workload.duration_s is None:
        raise ValueError("--session runs closed loop in a time window: give the concurrency (sessions at once) "
                         "and a duration")
    bound = longest_context(spec, workload.prompt_tokens, workload.output_tokens)
    for _ in range(8):
        n = workload.requests
        trace = Trace(prompt=np.zeros(n, dtype=np.int64), output=np.zeros(n, dtype=np.int64), arrival=np.zeros(n),
                      first_token=np.full(n, np.nan), end=np.full(n, np.nan), longest=bound)
        arrivals = SessionArrivals(trace, spec, concurrency=workload.concurrency,
                                   prompt_tokens=workload.prompt_tokens, output_tokens=workload.output_tokens,
                                   think_s=think_s, front_end=front_end, seed=workload.seed,
                                   answers_cached=answers_cached)
        run_engine(server, StepClock(step_model, np.random.default_rng(workload.seed)), trace, arrivals,
                   horizon_s=workload.horizon_s, fast_decodes=fast_decodes, seed=workload.seed)
        if not (arrivals.exhausted and float(np.nanmax(trace.client_send)) < workload.horizon_s):
            break
        workload = replace(workload, requests=2 * workload.requests)
    else:
        raise RuntimeError(f"the time window needs more than {workload.requests} requests")
    sent = arrivals.sent
    window = measured_window(trace, workload)
    window = window[window < sent]
    if not len(window):
        raise EmptyWindow("no simulated request falls in the measure window (too short a window or too slow a step)")
    log = arrivals.log
    agent, turn = np.asarray(log.agent)[window], np.asarray(log.turn)[window]
    ttft = trace.client_ttfa()[window]   # the first token the client sees: a call's at its name's end
    prompt, hits = trace.prompt[window], trace.cached[window]
    by_turn = {}
    for t in sorted(set(turn[agent == 0].tolist())):
        mine = (agent == 0) & (turn == t)
        values = ttft[mine]
        p50, p99 = np.percentile(values, [50, 99]) if len(values) else (None, None)
        by_turn[int(t)] = TurnPrediction(int(mine.sum()), None if p50 is None else float(p50),
                                         None if p99 is None else float(p99), float(prompt[mine].mean()),
                                         float(hits[mine].sum() / prompt[mine].sum()))
    completions = [end - log.started[k] for k, end in log.completed.items()
                   if log.started[k] >= workload.warmup_s and end <= workload.horizon_s]
    p50, p99 = np.percentile(completions, [50, 99]) if completions else (None, None)
    rounds = int(np.asarray(log.tool_round)[window].sum())
    return SessionsPrediction(result_of(server, workload, trace, window), by_turn, len(completions),
                              None if p50 is None else float(p50), None if p99 is None else float(p99), rounds)
