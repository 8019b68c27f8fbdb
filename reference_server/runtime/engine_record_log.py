"""The serving process's bounded memory of the engine's step and request records (GET /v1/engine/steps).

    engine step -> EngineStats.records -> EngineRecordLog.add()          (reader or engine thread)
    GET /v1/engine/steps?after=SEQ      -> EngineRecordLog.steps.after()  (event loop)

Each stream numbers its records 1, 2, ... as they come and keeps the newest `capacity`; a
poller that falls further behind than that is told how many it missed (`dropped`). A lock
guards both sides: appends come from the thread that receives the engine's steps.
"""

from __future__ import annotations

import threading
from collections import deque
from itertools import islice

from contract.engine_record import MAX_ROWS_PER_POLL, REQUEST_FIELDS, STEP_FIELDS, as_row

STEP_CAPACITY = 200_000      # ~ minutes of steps at a few ms each: a poller every second never misses one
REQUEST_CAPACITY = 50_000


class RecordRing:
    """Numbered rows of one record kind, the newest `capacity` kept."""

    def __init__(self, columns: tuple[str, ...], capacity: int) -> None:
        self.columns = ("seq", *columns)
        self._rows: deque[list] = deque(maxlen=capacity)
        self._last = 0   # seq of the newest row
        self._lock = threading.Lock()

    def extend(self, records) -> None:
        if not records:
            return
        with self._lock:
            for record in records:
                self._last += 1
                self._rows.append([self._last, *as_row(record)])

    def after(self, seq: int, limit: int = MAX_ROWS_PER_POLL) -> dict:
        """The route's body: rows with seq > `seq`, oldest first, at most `limit`."""
        with self._lock:
            first = self._last - len(self._rows) + 1
            start = max(seq + 1, first)
            tail = len(self._rows) - (start - first)   # rows from `start` to the newest: read from the right
            rows = list(islice(reversed(self._rows), max(tail, 0)))[::-1][:limit]
            last = self._last
        return {"columns": list(self.columns), "rows": rows, "next": rows[-1][0] if rows else max(seq, 0),
                "first": first if last else None, "last": last, "dropped": max(0, first - seq - 1) if last else 0}


class EngineRecordLog:
    def __init__(self, step_capacity: int = STEP_CAPACITY, request_capacity: int = REQUEST_CAPACITY) -> None:
        self.steps = RecordRing(STEP_FIELDS, step_capacity)
        self.requests = RecordRing(REQUEST_FIELDS, request_capacity)

    def add(self, records) -> None:
        """`records`: an `EngineRecords` (steps, requests), or None."""
        if records:
            self.steps.extend(records.steps)
            self.requests.extend(records.requests)
