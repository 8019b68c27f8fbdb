"""Admission control: who gets in (429 when the queue is full, 503 while draining).

Only the event loop touches these objects, so plain ints are enough (no locks).

"Waiting" means admitted but not yet served: for generation, a request that has not
received its first token; for the classifier, a request whose batch has not launched.
`--max-waiting N` turns away request N+1 at once with 429 and a `Retry-After` header;
nothing already admitted is ever dropped by admission.
"""

from __future__ import annotations

from reference_server.api.errors import APIError


class AdmissionControl:
    """Counts admitted requests; `admit()` returns a `Ticket` or raises `APIError`.

    Attributes:
        max_waiting: most admitted-but-waiting requests, None = unlimited.
        retry_after_s: the `Retry-After` value sent with a 429 (whole seconds).
        num_waiting: admitted requests not yet started.
        num_in_flight: admitted requests not yet released (waiting + running).
        draining: set on SIGTERM; every new request gets 503.
    """

    def __init__(self, *, max_waiting: int | None = None, retry_after_s: int = 1,
                 on_waiting_change=None) -> None:
        if max_waiting is not None and max_waiting < 0:
            raise ValueError(f"max_waiting must be >= 0 or None, got {max_waiting!r}")
        self.max_waiting = max_waiting
        self.retry_after_s = retry_after_s
        self.num_waiting = 0
        self.num_in_flight = 0
        self.draining = False
        self._on_waiting_change = on_waiting_change  # e.g. a Prometheus gauge's .set

    def admit(self) -> Ticket:
        if self.draining:
            raise APIError(503, "server is shutting down and admits no new requests",
                           code="draining", headers={"Retry-After": str(self.retry_after_s)})
        if self.max_waiting is not None and self.num_waiting >= self.max_waiting:
            raise APIError(
                429,
                f"server overloaded: {self.num_waiting} requests already waiting "
                f"(--max-waiting {self.max_waiting}); retry after {self.retry_after_s} s",
                code="queue_full", headers={"Retry-After": str(self.retry_after_s)})
        self.num_waiting += 1
        self.num_in_flight += 1
        self._changed()
        return Ticket(self)

    def _changed(self) -> None:
        if self._on_waiting_change is not None:
            self._on_waiting_change(self.num_waiting)


class Ticket:
    """One admitted request: `started()` once it is served, `release()` when done (both idempotent)."""

    def __init__(self, control: AdmissionControl) -> None:
        self._control = control
        self._waiting = True
        self._released = False

    def started(self) -> None:
        if self._waiting:
            self._waiting = False
            self._control.num_waiting -= 1
            self._control._changed()

    def release(self) -> None:
        if self._released:
            return
        self.started()
        self._released = True
        self._control.num_in_flight -= 1
