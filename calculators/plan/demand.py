"""The plan's demand: when each request is sent, its lengths, its session and its prompt's shared blocks.

    demand = from_rows(offsets, inputs, outputs, hash_ids, speedup=10, source="mooncake trace T")

A demand from a rate curve or a synthetic day (Poisson arrivals, drawn lengths, users with shared
prefixes) is calculators.plan.demand_curves'.

Prefixes. `Demand.prefix[i]` lists the ids of request i's leading blocks of `prefix_block_tokens`
tokens each: two requests that share leading ids share that prefix. The prompt is its listed blocks
in order, cut at `prompt[i]` tokens (the last listed block may be partial), then tokens of its own
(unique to the request) up to `prompt[i]`: the request's own blocks are implicit, as Mooncake rows
with fewer ids than tokens and the trace replay (`TracePrompts`) treat them. Listing them would cost
prompt / block ids per request (60 million ids for a day of a million 1000-token prompts) and
say nothing more. Mooncake rows' `hash_ids` are such ids, of 512 tokens.

Sessions: `session` is a request's session or user key (-1: none), the key consistent_hash routes on;
a chained demand's later turns wait on the turn before them (`after`, `delay_s`; `followers()`), and a
request that joins several (an agent's turn after its sub-agents, calculators.plan.demand_sessions) waits
on the others too (`joins`: (request, another it waits on) pairs; `waits()`).

Pure: numpy, no I/O; bad rows raise ValueError with one line naming the problem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np


TRACE_BLOCK_TOKENS = 512     # Mooncake's hash ids name 512-token blocks
SESSION_BLOCK_TOKENS = 16    # the simulated engine's KV block: a session prefix's blocks


@dataclass(frozen=True)
class Demand:
    """Requests in send order. Arrays are read-only views; `prefix` is per request (module doc)."""

    t_s: np.ndarray        # [n] float64 send times, sorted (s since the demand's start)
    prompt: np.ndarray     # [n] int64 prompt tokens (>= 1)
    output: np.ndarray     # [n] int64 output tokens (>= 1)
    session: np.ndarray    # [n] int64 session / user key, -1 = none
    prefix: tuple[tuple[int, ...], ...] | None   # per request, its prompt's leading block ids, or None
    prefix_block_tokens: int = TRACE_BLOCK_TOKENS
    source: str = ""       # how it was made, for the report
    duration_s: float | None = None   # the time it covers (a curve's length, a cut); None: the last send
    after: np.ndarray | None = None    # [n] int64 chained sessions: the earlier request this one waits on, -1 none
    delay_s: np.ndarray | None = None  # [n] float64: its wait after that request's answer (module doc)
    joins: tuple[tuple[int, int], ...] = ()   # (request, another earlier request it also waits on)

    def __post_init__(self) -> None:
        arrays = {}
        for name, dtype in (("t_s", np.float64), ("prompt", np.int64), ("output", np.int64), ("session", np.int64)):
            value = np.asarray(getattr(self, name))
            if value.ndim != 1:
                raise ValueError(f"demand: {name} must be one-dimensional, got shape {value.shape}")
            if (dtype is np.int64 and value.size and not np.issubdtype(value.dtype, np.integer)
                    and (not np.all(np.isfinite(value)) or np.any(value != np.rint(value)))):
                raise ValueError(f"demand: {name} must hold whole numbers")
            view = value.astype(dtype, copy=False).view()
            view.setflags(write=False)
            arrays[name] = view
            object.__setattr__(self, name, view)
        n = len(arrays["t_s"])
        for name, value in arrays.items():
            if len(value) != n:
                raise ValueError(f"demand: {name} has {len(value)} entries, t_s has {n}")
        t = arrays["t_s"]
        if n:
            if not np.all(np.isfinite(t)) or t[0] < 0:
                raise ValueError("demand: send times must be finite and >= 0")
            back = np.flatnonzero(np.diff(t) < 0)
            if back.size:
                k = int(back[0]) + 1
                raise ValueError(f"demand: send times go backwards at request {k} ({t[k]:g} after {t[k - 1]:g})")
            for name in ("prompt", "output"):
                if arrays[name].min() < 1:
                    raise ValueError(f"demand: every {name} length must be >= 1, got {int(arrays[name].min())}")
            if arrays["session"].min() < -1:
                raise ValueError("demand: session keys must be >= 0, or -1 for none")
        if self.prefix is not None:
            if not isinstance(self.prefix, tuple):
                object.__setattr__(self, "prefix", tuple(tuple(ids) for ids in self.prefix))
            if len(self.prefix) != n:
                raise ValueError(f"demand: prefix has {len(self.prefix)} entries, t_s has {n}")
        check_whole("demand: prefix_block_tokens", self.prefix_block_tokens, 1)
        if self.duration_s is not None and not (math.isfinite(self.duration_s) and self.duration_s >= 0):
            raise ValueError(f"demand: duration_s must be >= 0, got {self.duration_s!r}")
        if (self.after is None) != (self.delay_s is None):
            raise ValueError("demand: after and delay_s come together (a chained turn and its wait)")
        if self.after is not None:
            after = np.asarray(self.after, dtype=np.int64)
            delay = np.asarray(self.delay_s, dtype=np.float64)
            if len(after) != n or len(delay) != n:
                raise ValueError(f"demand: after and delay_s need {n} entries each")
            if n and (np.any(after >= np.arange(n)) or after.min() < -1):
                raise ValueError("demand: a chained request waits on an earlier one (after < its index), or -1")
            if np.any(~np.isfinite(delay[after >= 0])) or np.any(delay[after >= 0] < 0):
                raise ValueError("demand: a chained turn's delay_s must be seconds >= 0")
            for name, value in (("after", after), ("delay_s", delay)):
                value.setflags(write=False)
                object.__setattr__(self, name, value)
        if self.joins:
            if self.after is None:
                raise ValueError("demand: joins need after (a join is a chained request that waits on more)")
            object.__setattr__(self, "joins", tuple((int(i), int(j)) for i, j in self.joins))
            for i, j in self.joins:
                if not (0 <= j < i < n) or self.after[i] < 0 or j == self.after[i]:
                    raise ValueError(f"demand: join ({i}, {j}): a chained request waits on an earlier one "
                                     "besides the one it follows")

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def chained(self) -> bool:
        """Some request is a session's later turn, sent only after the turn before it ends."""
        return self.after is not None and bool(np.any(self.after >= 0))

    def followers(self) -> dict[int, list[int]]:
        """{request: the later requests that wait on it, in order} (empty when nothing is chained): one owner
        for who follows whom, for the plan's sends, its sessions and the replay's demand file."""
        if not self.chained:
            return {}
        out: dict[int, list[int]] = {}
        for later in np.flatnonzero(self.after >= 0).tolist():
            out.setdefault(int(self.after[later]), []).append(later)
        for i, j in self.joins:
            out.setdefault(j, []).append(i)
        return {k: sorted(v) for k, v in out.items()}

    def waits(self) -> dict[int, int]:
        """{chained request: how many earlier requests it waits on} (1, or more for a join)."""
        if not self.chained:
            return {}
        out = {int(k): 1 for k in np.flatnonzero(self.after >= 0).tolist()}
        for i, _ in self.joins:
            out[i] += 1
        return out

    def _unchained(self, what: str) -> None:
        if self.chained:
            raise ValueError(f"a demand of chained sessions cannot be {what}: a turn's send waits on the turn "
                             "before it, which the part may not hold")

    @property
    def span_s(self) -> float:
        """The time the demand covers: its duration, or its last send time if that is later (0 if empty)."""
        last = float(self.t_s[-1]) if len(self.t_s) else 0.0
        return last if self.duration_s is None else max(float(self.duration_s), last)

    def select(self, indices: np.ndarray, t_s: np.ndarray | None = None) -> Demand:
        """The requests at `indices` (rising), at their own times, over the same span (a share of it); with
        `t_s` (rising), sent at those times instead (requests a proxy passed on later, in that order)."""
        self._unchained("split")
        idx = np.asarray(indices, dtype=np.int64)
        return replace(self, t_s=self.t_s[idx] if t_s is None else t_s, prompt=self.prompt[idx], output=self.output[idx],
                       session=self.session[idx],
                       prefix=None if self.prefix is None else tuple(self.prefix[i] for i in idx),
                       duration_s=self.span_s)

    def window(self, start: float, end: float) -> Demand:
        """The requests sent in [start, end), at their own times (not shifted)."""
        self._unchained("cut into windows")
        lo, hi = np.searchsorted(self.t_s, [start, end], side="left")
        return replace(self, t_s=self.t_s[lo:hi], prompt=self.prompt[lo:hi], output=self.output[lo:hi],
                       session=self.session[lo:hi], prefix=None if self.prefix is None else self.prefix[lo:hi],
                       duration_s=max(0.0, min(float(end), self.span_s)))


def from_rows(offsets_s, prompt, output, hash_ids=None, *, speedup: float = 1.0, duration_s: float | None = None,
              source: str = "", session=None, prefix_block_tokens: int = TRACE_BLOCK_TOKENS, delay_s=None,
              parents=None, joins=()) -> Demand:
    """A trace's rows as demand. Offsets (s) are divided by `speedup`; `duration_s` keeps the rows sent
    before it (in the sped-up time). `hash_ids` (per row, a sequence of block ids; Mooncake's) become
    `prefix`, None when no row has any. `session` (per row: an int key, or a string such as BurstGPT's
    Session ID, with ""/None/-1 for none) becomes the session key; strings are numbered in order of
    first appearance. Rows are sorted by time (stable).

    `delay_s` (per row: None, or for a session's later turn its wait after the previous turn's answer,
    AIPerf's mooncake `delay`, loadgen.workload.traces) chains each such row to its session's row before it
    (in file order): it is sent at its own offset or `delay_s` after that answer, whichever is later (both
    over `speedup`), as the trace replay sends it. Its send time in the demand is the later of its offset and
    its predecessor's (the soonest it can go), so a chain's rows stay in order. `parents` (per row: None, or
    the earlier row it waits on) names each chained row's predecessor instead of its session's row before it
    (sub-agents that all wait on one row), and `joins` ((row, earlier row) pairs) the further rows a row waits
    on (a join of sub-agents)."""
    check_positive("speedup", speedup)
    if duration_s is not None:
        check_positive("duration_s", duration_s)
    t = np.asarray(offsets_s, dtype=np.float64) / float(speedup)
    n = len(t)
    for name, values in (("prompt", prompt), ("output", output)):
        if len(values) != n:
            raise ValueError(f"demand: {name} has {len(values)} entries, offsets_s has {n}")
    keys_all = np.full(n, -1, dtype=np.int64)
    if session is not None:
        if len(session) != n:
            raise ValueError(f"demand: session has {len(session)} entries, offsets_s has {n}")
        keys_all = _session_keys(session)
    after_row = None
    if delay_s is not None and any(d is not None for d in delay_s):
        if len(delay_s) != n:
            raise ValueError(f"demand: delay_s has {len(delay_s)} entries, offsets_s has {n}")
        after_row, delays, last = np.full(n, -1, dtype=np.int64), np.zeros(n), {}
        joined: dict[int, list[int]] = {}
        for i, j in joins:
            joined.setdefault(int(i), []).append(int(j))
        for r in range(n):
            key = int(keys_all[r])
            if delay_s[r] is not None:
                parent = last.get(key) if parents is None or parents[r] is None else int(parents[r])
                if (key < 0 and parents is None) or parent is None or not 0 <= parent < r:
                    raise ValueError(f"demand: row {r + 1} waits on its session's previous turn, and has none")
                after_row[r], delays[r] = parent, float(delay_s[r]) / float(speedup)
                t[r] = max(t[r], t[parent], *(t[j] for j in joined.get(r, ())))
            if key >= 0:
                last[key] = r
    order = np.argsort(t, kind="stable")
    if duration_s is not None:
        order = order[t[order] < duration_s]
    prompt_a, output_a = np.asarray(prompt)[order], np.asarray(output)[order]
    prefix = None
    if hash_ids is not None:
        if len(hash_ids) != n:
            raise ValueError(f"demand: hash_ids has {len(hash_ids)} entries, offsets_s has {n}")
        if any(len(ids) for ids in hash_ids):
            prefix = tuple(tuple(hash_ids[i]) for i in order.tolist())
    chain = {}
    if after_row is not None:
        position = np.full(n, -1, dtype=np.int64)
        position[order] = np.arange(len(order))
        before = after_row[order]
        chain = {"after": np.where(before >= 0, position[np.maximum(before, 0)], -1),
                 "delay_s": delays[order],
                 "joins": tuple((int(position[i]), int(position[j])) for i, j in joins
                                if position[i] >= 0 and position[j] >= 0)}
    details = [source] if source else []
    if speedup != 1:
        details.append(f"speedup {speedup:g}")
    if duration_s is not None:
        details.append(f"first {duration_s:g} s")
    return Demand(t[order], prompt_a, output_a, keys_all[order], prefix, prefix_block_tokens, ", ".join(details),
                  duration_s, **chain)


def _session_keys(session) -> np.ndarray:
    values = np.asarray(session)
    if np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64)
    numbers: dict[str, int] = {}
    keys = np.full(len(values), -1, dtype=np.int64)
    for i, value in enumerate(session):
        if value is None or value == "" or (isinstance(value, (int, np.integer)) and value == -1):
            continue
        keys[i] = numbers.setdefault(str(value), len(numbers))
    return keys


def check_whole(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def check_finite(name: str, value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
    return float(value)


def check_positive(name: str, value, where: str = "demand") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: {name} must be a number > 0, got {value!r}")
    return float(value)
