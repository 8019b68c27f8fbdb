"""Agentic sessions (`--session`) whole: how many a level began, finished, lost part-way or left
running, how long a finished one took, and how much of that was the tools' time.

    session_stats(frame) -> SessionStats | None      (contract.level_result)

`frame`: a level's measure records, every status. A session counts when its first request (turn 1,
step 1 of the main agent) is among them, so one begun in the warm-up is left out rather than counted
short. Completed: every request ok and its last request (`session_end`) answered. Failed: a request
that failed (a status other than ok or incomplete) ended it. Cut: neither (the level ended first).
None when no record belongs to a session.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from contract.level_result import PercentilePair, SessionStats


def session_stats(frame: pd.DataFrame) -> SessionStats | None:
    if "agent" not in frame or frame["agent"].isna().all():
        return None
    rows = frame[frame["agent"].notna() & frame["conversation_id"].notna()]
    ids = rows["conversation_id"].astype(object)
    first = rows[(rows["agent"].astype(object) == "main") & (rows["turn"] == 1) & (rows["step"] == 1)]
    begun = set(first["conversation_id"].astype(object))
    rows = rows[ids.isin(begun)]
    ids = rows["conversation_id"].astype(object)
    status = rows["status"].astype(object)
    failed_ids = set(ids[~status.isin(("ok", "incomplete"))])
    ended_ids = set(ids[rows["session_end"].fillna(False).astype(bool) & (status == "ok")])
    completed_ids = ended_ids - failed_ids - set(ids[status == "incomplete"])
    done = rows[ids.isin(completed_ids)]
    completion, tool_share, requests_mean, calls_mean = np.array([]), None, None, None
    if len(done):
        by = done.assign(end=done["t_start"] + done["e2e_s"]).groupby(done["conversation_id"].astype(object))
        span = by["end"].max() - by["t_start"].min()
        completion = span.to_numpy(dtype=float)
        waits = by["tool_wait_s"].sum(min_count=0).reindex(span.index).fillna(0.0)
        tool_share = float(waits.sum() / span.sum()) if span.sum() > 0 else None
        requests_mean = float(by.size().mean())
        calls_mean = float(by["tool_calls"].sum().mean())
    p50, p99 = (np.percentile(completion, [50, 99]) if len(completion) else (None, None))
    return SessionStats(sessions=len(begun), completed=len(completed_ids), failed=len(failed_ids & begun),
                        cut=len(begun - completed_ids - failed_ids),
                        completion_s=PercentilePair(p50=None if p50 is None else float(p50),
                                                    p99=None if p99 is None else float(p99)),
                        tool_wait_share=tool_share, requests_mean=requests_mean, tool_calls_mean=calls_mean,
                        uncalled_rounds=_uncalled(rows))


def _uncalled(rows: pd.DataFrame) -> int:
    """Tool rounds answered without a call: a main-agent request answered ok with no call, followed in its
    turn by another main-agent request (a turn's answer is its last)."""
    main = rows[(rows["agent"].astype(object) == "main")]
    if main.empty:
        return 0
    last_step = main.groupby([main["conversation_id"].astype(object), main["turn"]])["step"].transform("max")
    rounds = main[main["step"] < last_step]
    return int(((rounds["status"].astype(object) == "ok") & (rounds["tool_calls"] == 0)).sum())


def answers_read_back(frame: pd.DataFrame) -> bool | None:
    """Does the server's prefix cache find a session's answers when the next request sends them back? From
    the server's own counts (`cached_tokens`): over a session's consecutive main-agent requests, the next
    one's hits beyond the previous prompt (in whole blocks of `block` tokens, a 16-token block assumed
    at least) show the generated tokens were found. A real model's text reads back as the ids it generated
    (mostly); the reference server's seeded random weights send text its tokenizer does not read back, so
    only what was sent hits. None without session records or the server's counts; True when most pairs hit
    past the previous prompt."""
    needed = {"agent", "conversation_id", "turn", "step", "prompt_tokens", "cached_tokens", "status", "t_start"}
    if not needed <= set(frame.columns):
        return None
    main = frame[(frame["agent"].astype(object) == "main") & (frame["status"].astype(object) == "ok")
                 & frame["cached_tokens"].notna()].sort_values("t_start")
    if main.empty:
        return None
    previous = main.groupby(main["conversation_id"].astype(object))["prompt_tokens"].shift(1)
    pairs = previous.notna()
    if pairs.sum() < 10:
        return None
    beyond = main.loc[pairs, "cached_tokens"] > previous[pairs] + 16
    return bool(beyond.mean() > 0.5)
