"""A background thread that appends rows to a CSV on a fixed cadence: the shared loop of the samplers.

The header is written once (when the file is new or empty), rows are flushed every tick so a
killed run keeps what it had, and ticks stay on a fixed grid (`next_tick += interval`) so a
slow tick does not shift every later one.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from contract.options import option, parse_duration


@dataclass(frozen=True)
class IntervalOption:
    """`--interval`, once for the samplers that run on their own (`servecap sample`, the canary process);
    a sweep's is its --sample-interval."""

    interval: float | None = option(None, parse=parse_duration,
                                    help="time between samples (1, 500ms, 2s; servecap sample: default 1 s, the "
                                         "canary 0.5 s)")


class PeriodicCsv:
    """Calls `tick()` every `interval_s` and appends the rows it returns to `path`."""

    def __init__(self, path: Path, columns: tuple[str, ...], interval_s: float,
                 tick: Callable[[], Iterable[tuple]], name: str, *, tick_on_stop: bool = False) -> None:
        """`tick_on_stop`: tick once more when stopped (a poller that must not lose the last rows)."""
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.path, self.columns, self.interval_s, self.tick = Path(path), columns, interval_s, tick
        self.tick_on_stop = tick_on_stop
        self.rows_written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def _loop(self) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "a", newline="") as fh:
            writer = csv.writer(fh)
            if new:
                writer.writerow(self.columns)
            next_tick = time.monotonic()
            while not self._stop.is_set():
                self._write(writer, fh)
                next_tick += self.interval_s
                self._stop.wait(max(0.0, next_tick - time.monotonic()))
            if self.tick_on_stop:
                self._write(writer, fh)

    def _write(self, writer, fh) -> None:
        rows = [["" if value is None else value for value in row] for row in self.tick()]
        writer.writerows(rows)
        fh.flush()
        self.rows_written += len(rows)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
