"""One Locust process's share of a test: send requests, time them, record them.

Scenario-independent: a scenario (chat, classify) only renders requests to bytes
(`prepare`). `LoadRun` owns the keep-alive connections, the clock, the record sink,
the generator-health monitor, Locust stats reporting and the open-loop driver.

Closed loop: each Locust user calls `user_step()` in a loop (wait_time 0), one
request at a time. Open loop (`--arrival poisson|constant|gamma:CV --rate R`): the first
user of each process drives that process's share of one seeded schedule (slot i goes to
process i % processes); every arrival gets its own greenlet, prepared 2 ms early, which
sleeps until its slot and sends regardless of responses. At most `--max-inflight`
requests are in flight per process; an arrival that finds the bound full waits (its
lateness shows it) and the hit is counted in the meta file.
A trace replay (`--trace`) is the same driver over the trace's offsets and rows; the test
stops once the trace's last request has finished.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import replace
from itertools import count
from pathlib import Path

import gevent
import gevent.event
import gevent.pool
from gevent import GreenletExit
from locust.exception import StopUser

from contract.arrivals import iter_offsets, my_share
from contract.hedging import parse_hedge
from loadgen.workload.prompts import request_rng
from loadgen.workload.traces import parallel_groups
from loadgen.client.clock import Clock
from loadgen.client.exchange import Exchange, Outcome, summarize
from loadgen.client.sse import answer_text
from loadgen.scenario.generator_health import GeneratorHealth
from loadgen.scenario.hedged_send import HedgedSending
from loadgen.client.greenlet_time import sleep_until, yield_now
from loadgen.client.http_stream import ConnectionPool, run_exchange, send_request
from loadgen.scenario.locust_report import report_to_locust
from loadgen.client.request_bytes import Target
from loadgen.scenario.request_record import request_record
from loadgen.scenario.session_loop import run_session
from loadgen.scenario.route import Prepared, Route, Scenario
from loadgen.scenario.run_settings import RunSettings

log = logging.getLogger(__name__)

PREPARE_LEAD_S = 0.002   # open loop: render an arrival's request this long before its slot
SPIN_S = 0.0012          # open loop: yield-spin this last stretch (epoll timers round up to 1 ms)
OPEN_LOOP_START_S = 0.05  # local open loop: first slot this long after the driver starts
DISTRIBUTED_START_S = 1.0 # distributed open loop: master picks t0 this far ahead


def process_share(environment, role: str) -> tuple[int, int]:
    """(this process's index, how many processes share the test): a worker's index among --expect-workers,
    else (0, 1). Open-loop slots and a dataset's deck are split by it."""
    if role != "worker":
        return 0, 1
    count = max(int(getattr(environment.parsed_options, "expect_workers", 1) or 1), 1)
    return max(getattr(environment.runner, "worker_index", 0), 0) % count, count


class LoadRun(HedgedSending):
    def __init__(self, environment, scenario: Scenario | None, settings: RunSettings, sink) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.scenario = scenario
        self.settings = settings
        self.sink = sink
        self.records_path = Path(settings.records) if settings.records else None
        self.clock = Clock()
        self.test_start_perf = time.perf_counter()
        self.role = sink.role
        index = max(getattr(self.runner, "worker_index", 0), 0)
        self.process_index, self.process_count = process_share(environment, self.role)
        if self.process_index != index:
            log.error("worker index %d >= --expect-workers %d: open-loop slots will overlap", index, self.process_count)
        options = environment.parsed_options
        host = socket.gethostname()
        self.worker = (f"worker{index}@{host}:{os.getpid()}" if self.role == "worker"
                       else f"{self.role}@{host}:{os.getpid()}")
        self.health = GeneratorHealth(self.worker)
        self.pool = ConnectionPool(Target.from_url(environment.host)) if self.role != "master" else None
        self.route = Route(self.pool, scenario) if self.pool is not None else None
        self.slices = None   # a SliceDriver when --slice-plan is given (see start())
        self._seq = count()
        self._conversations = count()
        self.trace = getattr(scenario, "trace", None)   # a trace replay: open loop at the trace's times
        self._driver_claimed = False
        self.stopping = False   # the test is ending (its -t, a stop): the open loop sends nothing more
        self._stop_requested = gevent.event.Event()   # set with `stopping`: what an idle user waits on
        self._warned_cap = False
        self._t0_unix = getattr(options, "servecap_t0", None)
        self._users_at_start = getattr(options, "servecap_users", None)
        self.hedge = parse_hedge(settings.hedge_after)
        self.hedge_pool = (ConnectionPool(Target.from_url(settings.hedge_host)) if settings.hedge_host and
                           self.pool is not None else self.pool)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        cores = self.settings.worker_cpus
        if self.role == "worker" and cores and hasattr(os, "sched_setaffinity"):
            core = cores[self.process_index % len(cores)]
            os.sched_setaffinity(0, {core})   # a core of its own: its loop lag is not its siblings'
            log.info("%s pinned to core %d", self.worker, core)
        if self.role != "master":
            self.health.start(measure_from=self.test_start_perf + self.settings.warmup_s)
        if self.settings.slice_plan and self.role == "local":
            from loadgen.scenario.slice_driver import SliceDriver   # gevent-side; only compare runs need it

            self.slices = SliceDriver(self, self.settings.slice_plan)
            self.slices.start()

    def begin_stop(self) -> None:
        """The test is about to stop its users (Locust's test_stopping): an open loop's driver sends no
        more slots and only waits for its requests in flight, which Locust's --stop-timeout bounds
        (before this, the sweep's 30 s stop timeout let the driver send for 30 s past the level's
        end, and those requests counted as measured)."""
        self.stopping = True
        self._stop_requested.set()

    def stop(self) -> None:
        self.health.stop()

    def level(self) -> str:
        if self.settings.level:
            return self.settings.level
        if self.trace is not None:
            return "trace"
        if self.settings.arrival.open_loop:
            return f"rps={self.settings.arrival.rate_rps:g}"
        users = self.runner.target_user_count if self.role == "local" else self._users_at_start
        return f"c={users if users is not None else '?'}"

    def level_for_meta(self) -> str:
        return self.level()

    # -- closed loop --------------------------------------------------------------------
    def user_step(self) -> None:
        """One Locust task iteration."""
        if self.slices is not None:
            self.slices.user_step()
            return
        if self.settings.arrival.open_loop or self.trace is not None:
            if not self._driver_claimed:
                self._driver_claimed = True
                self.drive_open_loop()
            else:  # extra users have nothing to do in open loop
                log.info("open loop: one user per process drives the schedule; this extra user idles")
            # nothing more to send (the schedule or the trace is done): wait for the stop, then end this user
            # at once, so Locust's graceful stop does not wait its --stop-timeout for a sleeping task
            self._stop_requested.wait()
            raise StopUser()
        if getattr(self.scenario, "agentic", False):
            self.run_agent_session()
            return
        if getattr(self.scenario, "multi_turn", False):
            self.converse()
            return
        t_ready = time.perf_counter()   # the intended send time: the user's last request just ended
        index = next(self._seq)
        rng = request_rng(self.settings.seed, self.settings.level, self.process_index, index)
        self.send(index, self.scenario.prepare(rng), t_ready=t_ready)

    def converse(self) -> None:
        """Closed loop, multi-turn: one whole conversation, a turn after each answer (plus the think time).
        A turn that fails ends the conversation: its history would lack the answer."""
        number = next(self._conversations)
        conversation = self.scenario.conversation(request_rng(self.settings.seed, self.settings.level,
                                                              self.process_index, f"c{number}"),
                                                  f"{self.worker}/c{number}")
        t_ready = time.perf_counter()
        for turn in range(conversation.turns):
            exchange = Exchange()
            outcome = self.send(next(self._seq), conversation.prepare(turn), exchange=exchange, t_ready=t_ready)
            if outcome is None or outcome.status != "ok":
                return
            conversation.answered(answer_text(exchange.lines, bytes(exchange.body), stream=self.scenario.stream))
            if turn + 1 < conversation.turns and conversation.think_time_s:
                gevent.sleep(conversation.think_time_s)
            t_ready = time.perf_counter()

    def run_agent_session(self) -> None:
        """Closed loop, --session: one whole agentic session (loadgen.scenario.session_loop)."""
        number = next(self._conversations)
        requests = self.scenario.agent_session(request_rng(self.settings.seed, self.settings.level,
                                                           self.process_index, f"s{number}"),
                                               f"{self.worker}/s{number}")
        run_session(requests, lambda prepared, exchange, t_ready: self.send(next(self._seq), prepared,
                                                                            exchange=exchange, t_ready=t_ready),
                    stopped=lambda: self.stopping, think_time_s=self.scenario.config.think_time_s,
                    server=self.environment.host or "the server")

    # -- open loop ----------------------------------------------------------------------
    def drive_open_loop(self) -> None:
        """Send this process's slots of the schedule, each at its time, until the test stops (then
        wait for the requests in flight) or the trace ends.

        The driver itself renders the request, takes a connection, waits for the slot,
        stamps t_start and writes the request; a greenlet per request then reads the
        response. So the only work between the slot and the write is the write.
        """
        t0_unix = self._t0_unix if self._t0_unix is not None else self.clock.now() + OPEN_LOOP_START_S
        t0 = self.clock.perf(t0_unix)
        inflight = gevent.pool.Pool(self.settings.max_inflight)
        trace = self.trace
        if trace is not None and trace.trace.chained:
            self._replay_sessions(t0, inflight)
            return
        schedule = trace.offsets() if trace is not None else iter_offsets(self.settings.arrival, self.settings.seed)
        try:
            for index, offset in enumerate(schedule):
                if not my_share(index, self.process_index, self.process_count):
                    continue
                t_sched = t0 + offset
                sleep_until(t_sched - PREPARE_LEAD_S)
                if self.stopping:
                    break
                rng = request_rng(self.settings.seed, self.settings.level, "open", index)
                prepared = trace.prepare(index, rng) if trace is not None else self.scenario.prepare(rng)
                self.send_at(t_sched, index, prepared, inflight, self.route)
            inflight.join()   # the last answers (Locust's stop timeout bounds the wait when the test stops)
            if not self.stopping:   # a trace ends: then this process (a worker: the master stops at -t)
                log.info("trace replayed: %d requests; stopping", len(trace.trace.rows))
                gevent.spawn(self.runner.quit)
        finally:
            inflight.kill(block=True)  # in-flight requests write "incomplete" records

    def _replay_sessions(self, t0: float, inflight: gevent.pool.Pool) -> None:
        """A trace of sessions (loadgen.workload.traces): each of this process's sessions in a greenlet of
        `inflight`, from its first row's time; each later turn at its time or its delay after the previous
        answer, whichever is later (both over --speedup); a group of `parallel` rows at once, the step after it
        on the last of their answers (loadgen.workload.traces). A failed turn does not end its session: each
        row is its own recorded prompt. Records carry the session as conversation_id and the turn."""
        trace, speedup = self.trace, self.scenario.config.trace_speedup

        def turn(index: int, number: int, answered: float | None) -> float | None:
            """Send row `index` as turn `number` when its time comes; when it ended (None: the run stopped)."""
            row = trace.trace.rows[index]
            t_sched = t0 + row.offset_s / speedup
            if answered is not None and row.delay_s is not None:
                t_sched = max(t_sched, answered + row.delay_s / speedup)
            sleep_until(t_sched - PREPARE_LEAD_S)
            if self.stopping:
                return None
            rng = request_rng(self.settings.seed, self.settings.level, "open", index)
            prepared = trace.prepare(index, rng, turn=number)
            sleep_until(t_sched, spin_s=SPIN_S)
            self.send(index, prepared, t_sched=t_sched)
            return time.perf_counter()

        def session(rows: tuple[int, ...]) -> None:
            answered, number = None, 0
            for step in parallel_groups(rows, trace.trace.rows):
                if len(step) == 1:
                    number += 1
                    answered = turn(step[0], number, answered)
                else:   # a group sent at once; the next step waits on the last of them
                    jobs = [gevent.spawn(turn, index, number + k + 1, answered) for k, index in enumerate(step)]
                    number += len(step)
                    try:
                        gevent.joinall(jobs, raise_error=True)
                    finally:
                        gevent.killall([job for job in jobs if not job.dead], block=True)
                    ends = [job.value for job in jobs]
                    answered = None if None in ends else max(ends)
                if answered is None:
                    return

        try:
            for number, rows in enumerate(trace.trace.sessions):
                if my_share(number, self.process_index, self.process_count):
                    inflight.spawn(session, rows)
            inflight.join()
            if not self.stopping:
                log.info("trace replayed: %d sessions, %d requests; stopping", len(trace.trace.sessions),
                         len(trace.trace.rows))
                gevent.spawn(self.runner.quit)
        finally:
            inflight.kill(block=True)

    def send_at(self, t_sched: float, index: int, prepared: Prepared, inflight: gevent.pool.Pool,
                route: Route) -> gevent.Greenlet | None:
        """Open loop: take a connection, wait for the slot, write the request, and leave reading
        the response to a new greenlet in `inflight` (returned; None when the connect failed)."""
        if inflight.full():
            self.health.inflight_cap_hits += 1
            if not self._warned_cap:
                self._warned_cap = True
                log.warning("open loop: %d requests in flight (--max-inflight); arrivals now wait",
                            self.settings.max_inflight)
            inflight.wait_available()
        if getattr(route.scenario, "transport", None) is not None:   # gRPC: the call itself is the send
            sleep_until(t_sched, spin_s=SPIN_S)
            return inflight.spawn(self.send, index, prepared, t_sched=t_sched, route=route)
        try:
            conn = route.pool.acquire()
        except OSError as exc:
            self._record_failure(index, prepared, t_sched, f"connect: {exc}", route)
            return None
        exchange = Exchange()
        sleep_until(t_sched, spin_s=SPIN_S)
        try:
            send_request(conn[0], prepared.request, exchange)
            sent = True
        except OSError:
            sent = False  # a stale keep-alive socket: the request greenlet reconnects and resends
        return inflight.spawn(self.send, index, prepared, t_sched=t_sched, conn=conn, exchange=exchange, sent=sent,
                              route=route)

    # -- one request --------------------------------------------------------------------
    def send(self, index: int, prepared: Prepared, *, t_sched: float | None = None, conn=None,
             exchange: Exchange | None = None, sent: bool = False, route: Route | None = None,
             t_ready: float | None = None) -> Outcome | None:
        """One request to its end and its record (its outcome returned; None when it could not connect).
        t_sched: the open-loop slot; t_ready: a closed-loop user's intended send time (perf_counter s).
        Either makes the record's queue_s."""
        route = route or self.route
        transport = getattr(route.scenario, "transport", None)   # a scenario that is not HTTP (gRPC)
        if transport is not None:
            return self._send_by(transport, index, prepared, t_sched, route, t_ready)
        if self.hedge is not None and route is self.route:
            return self._send_hedged(index, prepared, t_sched, conn, exchange, sent, t_ready)
        if conn is None:
            try:
                conn = route.pool.acquire()
            except OSError as exc:
                self._record_failure(index, prepared, t_sched, f"connect: {exc}", route, t_ready)
                gevent.sleep(0.1)  # a refused connection must not spin the user
                return None
        exchange = exchange or Exchange()
        stopped = False
        outcome = None
        try:
            run_exchange(route.pool, prepared.request, exchange, stream=route.scenario.stream,
                         timeout_s=self.settings.request_timeout_s, conn=conn, sent=sent)
        except GreenletExit:
            stopped = True
            log.debug("request %d stopped in flight (t_start=%s)", index, exchange.t_start)
            raise
        finally:
            if exchange.t_start is not None or not stopped:
                outcome = self._finish(index, prepared, exchange, t_sched, stopped, route, t_ready)
        return outcome

    def _send_by(self, transport, index: int, prepared: Prepared, t_sched, route: Route, t_ready) -> Outcome:
        exchange = Exchange()
        try:
            transport.run(prepared.request, exchange, self.settings.request_timeout_s)
        except GreenletExit:
            if exchange.t_start is not None:
                self._finish(index, prepared, exchange, t_sched, True, route, t_ready)
            raise
        return self._finish(index, prepared, exchange, t_sched, False, route, t_ready)

    def _finish(self, index, prepared: Prepared, exchange: Exchange, t_sched, stopped: bool,
                route: Route | None = None, t_ready: float | None = None, *, hedge: str | None = None,
                hedge_delay_s: float | None = None, cancelled: bool = False) -> Outcome:
        route = route or self.route
        scenario = route.scenario
        # Parsing a long stream pauses now and then so other streams keep being read; if the
        # test stops during a pause, the record is still written (unpaused) before dying.
        killed = False
        try:
            outcome = summarize(exchange, stream=scenario.stream, prompt_tokens_asked=prepared.prompt_tokens_asked,
                                stopped=stopped, pause=None if stopped else yield_now)
        except GreenletExit:
            killed = True
            outcome = summarize(exchange, stream=scenario.stream, prompt_tokens_asked=prepared.prompt_tokens_asked,
                                stopped=stopped)
        if cancelled:   # a hedge's copy that lost: closed on purpose, neither answered nor failed
            outcome = replace(outcome, status="cancelled", error="hedged: the other copy showed first")
        t_start = exchange.t_start if exchange.t_start is not None else time.perf_counter()
        if t_sched is not None and hedge != "copy":
            self.health.note_lateness(t_start - t_sched)
        intended = t_sched if t_sched is not None else t_ready
        self.health.requests_sent += 1
        record = request_record(
            outcome, prepared, route,
            level=f"{route.arm}/{self.level()}" if route.arm else self.level(),
            phase=route.phase or ("warmup" if t_start - self.test_start_perf < self.settings.warmup_s else "measure"),
            t_sched_unix=self.clock.unix(t_sched) if t_sched is not None else None,
            t_start_unix=self.clock.unix(t_start),
            queue_s=max(0.0, t_start - intended) if intended is not None else None,
            worker=self.worker, request_id=f"{self.worker}#{index}", round=self.settings.round,
            hedge=hedge, hedge_delay_s=hedge_delay_s)
        self.sink.put(record)
        if not stopped and not cancelled:  # Locust's stats count exactly the requests that finished
            report_to_locust(self.environment.events.request, self.environment.servecap.tokens, scenario.api,
                             scenario.path, outcome, arm=route.arm, pause=None if killed else yield_now)
        if killed:
            raise GreenletExit
        return outcome

    def _record_failure(self, index, prepared: Prepared, t_sched, message: str, route: Route | None = None,
                        t_ready: float | None = None) -> None:
        exchange = Exchange(t_start=time.perf_counter(), failure="error", failure_message=message[:200])
        self._finish(index, prepared, exchange, t_sched, stopped=False, route=route, t_ready=t_ready)
