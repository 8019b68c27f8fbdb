"""Timing error of recorded TTFT/ITL against a scripted server's truth, request by request.

Pure: `compare(records, truth)` joins on response_id. For each `ok` streamed record:
  ttft error  = recorded ttft_s - (first content write - request read), server clock
  ttfa error  = recorded ttfa_s - (first answer write - request read), for a stream that reasoned first
  itl errors  = recorded gap i - (write i+1 - write i)
  send delay  = server read time - recorded t_start (loopback + both sides' scheduling)
Errors are in seconds; summaries give p50/p99 of the absolute error (numpy percentiles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ErrorSummary:
    count: int
    p50_abs_ms: float
    p99_abs_ms: float
    max_abs_ms: float
    mean_ms: float  # signed: > 0 means the client read later than the server wrote

    @classmethod
    def of(cls, errors_s: np.ndarray) -> "ErrorSummary":
        if len(errors_s) == 0:
            return cls(0, float("nan"), float("nan"), float("nan"), float("nan"))
        abs_ms = np.abs(errors_s) * 1e3
        return cls(len(errors_s), float(np.percentile(abs_ms, 50)), float(np.percentile(abs_ms, 99)),
                   float(abs_ms.max()), float(np.mean(errors_s) * 1e3))

    def within(self, p50_ms: float, p99_ms: float) -> bool:
        return self.count > 0 and self.p50_abs_ms <= p50_ms and self.p99_abs_ms <= p99_ms


@dataclass(frozen=True)
class Comparison:
    matched: int          # ok records joined to a truth row
    unmatched: int        # ok records whose response_id the server never logged
    ttft: ErrorSummary
    itl: ErrorSummary
    send_delay: ErrorSummary
    chunks: int           # content chunks received in matched records
    ttfa: ErrorSummary | None = None   # time to the first answer token, where the truth has one


def compare(records: list[dict], truth: dict[str, dict]) -> Comparison:
    ttft, itl, send, ttfa = [], [], [], []
    matched = unmatched = chunks = 0
    for record in records:
        if record.get("status") != "ok" or record.get("ttft_s") is None:
            continue
        row = truth.get(record.get("response_id"))
        if row is None:
            unmatched += 1
            continue
        writes = row["t_chunks"]
        matched += 1
        chunks += len(writes)
        ttft.append(record["ttft_s"] - (writes[0] - row["t_read"]))
        t_answer = row.get("t_answer") if "t_answer" in row else _answer_write(row)
        if t_answer is not None and record.get("ttfa_s") is not None:
            ttfa.append(record["ttfa_s"] - (t_answer - row["t_read"]))
        send.append(row["t_read"] - record["t_start"])
        true_gaps = np.diff(writes)
        gaps = np.asarray(record["itl_s"])
        if len(gaps) == len(true_gaps):
            itl.extend((gaps - true_gaps).tolist())
    return Comparison(matched, unmatched, ErrorSummary.of(np.asarray(ttft)), ErrorSummary.of(np.asarray(itl)),
                      ErrorSummary.of(np.asarray(send)), chunks, ErrorSummary.of(np.asarray(ttfa)) if ttfa else None)


def _answer_write(row: dict) -> float | None:
    """A scripted server's truth line: its first answer chunk's write (`answer_index` into t_chunks)."""
    index = row.get("answer_index")
    writes = row["t_chunks"]
    return writes[index] if isinstance(index, int) and 0 < index < len(writes) else None
