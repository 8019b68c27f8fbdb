"""The race of a hedged request (`--hedge-after`, contract.hedging): the primary, then after the delay a copy,
the first to show kept and the other closed. Exchanges only; the load run records both.

    race = HedgeRace(request, stream=True, timeout_s=600)
    winner = race.run(pool, conn, sent, delay_s, copy_pool)   # "primary" | "copy"
    race.primary, race.copy                                      # the exchanges (copy None: not hedged)
"""

from __future__ import annotations

import time

import gevent
import gevent.event

from loadgen.client.exchange import Exchange
from loadgen.client.http_stream import ConnectionPool, run_exchange


class HedgeRace:
    def __init__(self, request: bytes, *, stream: bool, timeout_s: float, primary: Exchange | None = None) -> None:
        self.request, self.stream, self.timeout_s = request, stream, timeout_s
        self.primary, self.copy = primary or Exchange(), None
        self._shown = gevent.event.AsyncResult()
        self._greenlets: list[gevent.Greenlet] = []

    def run(self, pool: ConnectionPool, conn, sent: bool, delay_s: float | None, copy_pool: ConnectionPool) -> str:
        """Send (or, `sent`, read) the primary on `conn`; when it has shown nothing `delay_s` after its send, a copy
        on `copy_pool`; wait for the first to show (or both to end), close the other. The winner's tag."""
        first = self._spawn(pool, self.primary, "primary", conn, sent)
        if delay_s is not None:
            gevent.sleep(0)   # the primary writes its request: the delay counts from its send
            sent_at = self.primary.t_start if self.primary.t_start is not None else time.perf_counter()
            gevent.wait([self._shown, first], timeout=max(0.0, sent_at + delay_s - time.perf_counter()), count=1)
            if not self._shown.ready() and not first.dead:
                self.copy = Exchange()
                self._spawn(copy_pool, self.copy, "copy")
        while not self._shown.ready() and not all(g.dead for g in self._greenlets):
            gevent.wait([self._shown, *(g for g in self._greenlets if not g.dead)], count=1)
        winner = self._shown.get() if self._shown.ready() else "primary"
        primary, copy = first, (self._greenlets[1] if len(self._greenlets) > 1 else None)
        loser, kept = (copy, primary) if winner == "primary" else (primary, copy)
        if loser is not None and not loser.dead:
            loser.kill(block=True)   # its socket closes: the server sees the client leave
        kept.join()
        return winner

    def stop(self) -> None:
        """The test stops: both copies closed now."""
        for g in self._greenlets:
            g.kill(block=True)

    def _spawn(self, pool: ConnectionPool, ex: Exchange, tag: str, conn=None, sent: bool = False) -> gevent.Greenlet:
        shown = self._shown
        ex.on_shown = lambda: None if shown.ready() else shown.set(tag)
        greenlet = gevent.spawn(self._exchange, pool, ex, conn, sent)
        self._greenlets.append(greenlet)
        return greenlet

    def _exchange(self, pool: ConnectionPool, ex: Exchange, conn, sent: bool) -> None:
        try:
            run_exchange(pool, self.request, ex, stream=self.stream, timeout_s=self.timeout_s, conn=conn, sent=sent)
        except OSError as exc:   # the copy's connect
            ex.failure, ex.failure_message = "error", f"connect: {exc}"[:200]
