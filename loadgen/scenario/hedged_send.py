"""`--hedge-after` in one Locust process (contract.hedging's rule): a request raced against its copy
(loadgen.client.hedge_race), then both copies recorded, the loser as `cancelled`, and the winner's time to
first token fed to the rule's running percentile. A mixin of `LoadRun` (loadgen.scenario.load_run), whose
route, settings, sequence, hedge rule and pools, and `_finish`/`_record_failure` it uses."""

from __future__ import annotations

import gevent
from gevent import GreenletExit

from loadgen.client.exchange import Exchange, Outcome
from loadgen.client.hedge_race import HedgeRace
from loadgen.scenario.route import Prepared


class HedgedSending:
    """`LoadRun`'s hedged requests: `_send_hedged`, `_note_hedge`."""

    def _send_hedged(self, index: int, prepared: Prepared, t_sched, conn, exchange: Exchange | None, sent: bool,
                     t_ready) -> Outcome | None:
        """One request under --hedge-after (contract.hedging): the race (loadgen.client.hedge_race), then both
        copies recorded, the loser cancelled."""
        route, stream = self.route, self.route.scenario.stream
        if conn is None:
            try:
                conn = route.pool.acquire()
            except OSError as exc:
                self._record_failure(index, prepared, t_sched, f"connect: {exc}", route, t_ready)
                gevent.sleep(0.1)
                return None
        race = HedgeRace(prepared.request, stream=stream, timeout_s=self.settings.request_timeout_s, primary=exchange)
        try:
            winner = race.run(route.pool, conn, sent, self.hedge.delay(), self.hedge_pool)
        except GreenletExit:
            race.stop()
            for ex, i in ((race.primary, index), (race.copy, None)):
                if ex is not None and ex.t_start is not None:
                    self._finish(i if i is not None else next(self._seq), prepared, ex, t_sched, True, route, t_ready)
            raise
        primary, copy = race.primary, race.copy
        if copy is None:   # not hedged: a request like any other
            outcome = self._finish(index, prepared, primary, t_sched, False, route, t_ready)
            self._note_hedge(outcome, stream)
            return outcome
        copy_index = next(self._seq)
        delay_s = (copy.t_start - primary.t_start) if (copy.t_start is not None and primary.t_start is not None) else None
        if winner == "copy":
            self._finish(index, prepared, primary, t_sched, False, route, t_ready, hedge="primary", cancelled=True)
            copy.t_start = primary.t_start   # the user waited from the first send
            outcome = self._finish(copy_index, prepared, copy, t_sched, False, route, t_ready, hedge="copy",
                                   hedge_delay_s=delay_s)
        else:
            self._finish(copy_index, prepared, copy, t_sched, False, route, t_ready, hedge="copy",
                         hedge_delay_s=delay_s, cancelled=True)
            outcome = self._finish(index, prepared, primary, t_sched, False, route, t_ready, hedge="primary")
        self._note_hedge(outcome, stream)
        return outcome

    def _note_hedge(self, outcome: Outcome | None, stream: bool) -> None:
        if outcome is not None and outcome.status == "ok":
            self.hedge.note(outcome.ttft_s if stream else outcome.e2e_s)
