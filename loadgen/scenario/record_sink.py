"""Where finished-request records go, per Locust role.

- local runner: appended to `--records` as each request finishes.
- worker: buffered and shipped to the master every 0.5 s (custom message
  `servecap_records`); never written locally, so a shared path is not double-written.
- master: writes every shipped batch on arrival. When the test stops (`test_stopping`,
  before the master tells workers to quit) it asks each worker to stop its users and
  send everything left (`servecap_flush` -> a batch marked final, with the worker's
  generator-health summary) and waits for all of them, then writes the meta file. This
  replaces aggregating in `test_stop` (workers' last reports arrive after it) and does
  not touch the `stats`/`errors` keys of Locust's own worker reports.
- a worker that quits on its own (Ctrl-C, SIGTERM) stops its users and ships the rest
  in `quitting`, before Locust's own quit message. A SIGKILLed worker loses at most
  the last 0.5 s of records.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
import gevent
from locust.runners import MasterRunner, WorkerRunner

from loadgen.scenario.generator_health import merge_summaries
from contract.loadgen_meta import update_meta
from contract.records import Record, RecordWriter

log = logging.getLogger(__name__)

MSG_RECORDS = "servecap_records"
MSG_FLUSH = "servecap_flush"
SHIP_INTERVAL_S = 0.5
FLUSH_WAIT_S = 20.0


class RecordSink:
    """Routes records for one Locust process; created once per process at `init`.

    `begin(run)` at each test start hands it the run (`records_path`, `health`,
    `level_for_meta()`), see `load_run.LoadRun`.
    """

    def __init__(self, environment) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.run = None
        self.role = ("master" if isinstance(self.runner, MasterRunner)
                     else "worker" if isinstance(self.runner, WorkerRunner) else "local")
        self._writer: RecordWriter | None = None
        self._buffer: list[dict] = []
        self._finals: dict[str, dict] = {}
        events = environment.events
        if self.role == "worker":
            self.runner.register_message(MSG_FLUSH, self._on_flush_request, concurrent=True)
            gevent.spawn(self._ship_forever)
            events.quitting.add_listener(self._on_worker_quitting)
        elif self.role == "master":
            self.runner.register_message(MSG_RECORDS, self._on_records)
            events.test_stopping.add_listener(self._on_master_stopping)
        if self.role == "local":
            events.test_stop.add_listener(self._on_local_stop)
        events.quitting.add_listener(lambda **_: self._close())

    # -- all roles --------------------------------------------------------------------
    def begin(self, run) -> None:
        self.run = run
        self._finals = {}
        if self.role == "worker":
            return
        path = run.records_path
        if self._writer is not None and (path is None or self._writer.path != Path(path)):
            self._close()
        if path is not None and self._writer is None:
            self._writer = RecordWriter(path)

    def put(self, record: Record) -> None:
        if self.role == "worker":
            self._buffer.append(record.to_dict())  # shipped to the master as a plain dict
        elif self._writer is not None:
            self._writer.write(record)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # -- local ------------------------------------------------------------------------
    def _on_local_stop(self, **_) -> None:
        run = self.run
        if run is not None and run.records_path is not None:
            meta = update_meta(run.records_path, run.level_for_meta(), merge_summaries([run.health.summary()]),
                               another_round=bool(run.settings.round))
            log.info("records: %s (%d written), meta: %s", run.records_path, self._writer.count if self._writer else 0, meta)

    # -- worker -----------------------------------------------------------------------
    def _take(self) -> list[dict]:
        batch, self._buffer = self._buffer, []
        return batch

    def _ship_forever(self) -> None:
        while True:
            gevent.sleep(SHIP_INTERVAL_S)
            if self._buffer and getattr(self.runner, "connected", True):
                batch = self._take()
                try:
                    self.runner.send_message(MSG_RECORDS, {"records": batch})
                except Exception:  # noqa: BLE001 - keep them for the next try
                    log.exception("could not ship %d records to the master; keeping them", len(batch))
                    self._buffer[:0] = batch

    def _send_final(self) -> None:
        run = self.run
        health = run.health.summary() if run is not None else None
        self.runner.send_message(MSG_RECORDS, {"records": self._take(), "final": True, "health": health})

    def _on_flush_request(self, environment, msg, **_) -> None:
        self.runner.stop()  # in-flight requests become "incomplete" records
        self._send_final()

    def _on_worker_quitting(self, **_) -> None:
        if self.runner.state not in ("stopped", "ready"):
            self.runner.stop()
        if self._buffer:
            self._send_final()

    # -- master -----------------------------------------------------------------------
    def _on_records(self, environment, msg, **_) -> None:
        data = msg.data or {}
        if self._writer is not None:
            self._writer.write_many(data.get("records") or ())
        if data.get("final"):
            self._finals[msg.node_id] = data.get("health") or {}

    def _on_master_stopping(self, **_) -> None:
        clients = [c.id for c in self.runner.clients.all if c.state != "missing"]
        for client_id in clients:
            self.runner.send_message(MSG_FLUSH, None, client_id=client_id)
        deadline = time.monotonic() + FLUSH_WAIT_S
        while time.monotonic() < deadline and not all(c in self._finals for c in clients):
            gevent.sleep(0.02)
        missing = [c for c in clients if c not in self._finals]
        if missing:
            log.error("records: no final batch from %d worker(s) within %.0f s: %s", len(missing), FLUSH_WAIT_S, missing)
        run = self.run
        if run is not None and run.records_path is not None:
            summaries = [h for h in self._finals.values() if h]
            update_meta(run.records_path, run.level_for_meta(), merge_summaries(summaries),
                        another_round=bool(run.settings.round))
            log.info("records: %s (%d written from %d workers)", run.records_path,
                     self._writer.count if self._writer else 0, len(self._finals))
