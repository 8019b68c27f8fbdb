"""A --session level's sessions, whole (reports.sessions), on records written out by hand."""

import math

import pandas as pd

from reports.sessions import session_stats


def _r(sid, turn, step, t, e2e, *, agent="main", status="ok", calls=0, wait=None, end=False):
    return dict(conversation_id=sid, turn=turn, step=step, agent=agent, t_start=t, e2e_s=e2e, status=status,
                tool_calls=calls, tool_wait_s=wait, session_end=end)


def test_completed_failed_cut_and_begun_in_the_warm_up():
    rows = [
        # a: complete; one tool round (0.5 s of tools), then the answer: 0 -> 2.0 s
        _r("a", 1, 1, 0.0, 0.5, calls=1), _r("a", 1, 2, 1.0, 1.0, wait=0.5, end=True),
        # b: two rounds, the first a fan-out of two sub-agents; 10 -> 13 s, 1.5 s waiting
        _r("b", 1, 1, 10.0, 0.5, calls=1), _r("b", 1, 1, 10.5, 0.4, agent="sub1"),
        _r("b", 1, 1, 10.5, 0.5, agent="sub2"), _r("b", 1, 2, 11.0, 0.5, calls=1, wait=0.5),
        _r("b", 1, 3, 12.5, 0.5, wait=1.0, end=True),
        # c: its second request failed
        _r("c", 1, 1, 0.0, 0.5, calls=1), _r("c", 1, 2, 1.0, 0.1, status="http_500"),
        # d: still running at the end (a round answered without a call, then cut)
        _r("d", 1, 1, 0.0, 0.5), _r("d", 1, 2, 1.0, 0.2, status="incomplete"),
        # e: begun in the warm-up (its first request is not here): left out
        _r("e", 2, 1, 0.0, 0.5), _r("e", 2, 2, 1.0, 0.5, end=True),
    ]
    stats = session_stats(pd.DataFrame(rows))
    assert (stats.sessions, stats.completed, stats.failed, stats.cut) == (4, 2, 1, 1)
    assert stats.completion_s.p50 == 2.5 and math.isclose(stats.completion_s.p99, 2.99)
    assert math.isclose(stats.tool_wait_share, (0.5 + 1.5) / (2.0 + 3.0))
    assert stats.requests_mean == 3.5 and stats.tool_calls_mean == 1.5
    assert stats.uncalled_rounds == 1   # d's first request asked a call and got none


def test_a_run_without_sessions_has_no_section():
    assert session_stats(pd.DataFrame([{"conversation_id": "x", "turn": 1, "agent": None, "status": "ok"}])) is None
    assert session_stats(pd.DataFrame([{"status": "ok"}])) is None


def test_the_prefix_cache_share_of_a_turn_counts_only_records_whose_server_said():
    from reports.summary import by_turn, cached_share

    ok = pd.DataFrame([dict(turn=1, agent="main", prompt_tokens=100, cached_tokens=0.0, ttft_s=0.1, tpot_s=0.01,
                            e2e_s=0.2),
                       dict(turn=2, agent="main", prompt_tokens=300, cached_tokens=240.0, ttft_s=0.1, tpot_s=0.01,
                            e2e_s=0.2),
                       dict(turn=2, agent="main", prompt_tokens=100, cached_tokens=float("nan"), ttft_s=0.1,
                            tpot_s=0.01, e2e_s=0.2),
                       dict(turn=2, agent="sub1", prompt_tokens=50, cached_tokens=0.0, ttft_s=0.1, tpot_s=0.01,
                            e2e_s=0.2)])
    turns = by_turn(ok)
    assert turns["1"].cached_share == 0.0 and turns["2"].cached_share == 0.8   # 240 of 300; the sub-agent is not
    assert turns["2"].requests == 2                                           # the turn's
    assert cached_share(ok.drop(columns="cached_tokens")) is None


def test_the_answer_counts_sessions_at_once():
    from types import SimpleNamespace

    from contract.level_result import PercentilePair, SessionStats
    from reports.answer import session_sentence

    level = SimpleNamespace(level="continuous/c=8", sessions=SessionStats(
        sessions=40, completed=36, failed=2, cut=2, completion_s=PercentilePair(p50=1.5, p99=3.25),
        tool_wait_share=0.3))
    text = session_sentence(level, "turns:3,tools:1")
    assert text.startswith("That is **8 agent sessions at once** (`--session turns:3,tools:1`): a completed session "
                           "took 1.50 s at p50 (3.25 s at p99), 30% of it waiting on tools; 2 of 40 sessions failed")
    assert session_sentence(SimpleNamespace(level="c=8", sessions=None), None) is None


def test_whether_answers_read_back_is_read_from_the_servers_counts():
    from reports.sessions import answers_read_back

    def session(sid, hits_past_prompt):
        rows, prompt = [], 300
        for k in range(6):
            cached = 0 if k == 0 else (previous + 40 if hits_past_prompt else previous // 16 * 16)
            rows.append(dict(conversation_id=sid, agent="main", turn=1 + k // 2, step=1 + k % 2, status="ok",
                             t_start=float(k), prompt_tokens=prompt, cached_tokens=float(cached)))
            previous, prompt = prompt, prompt + 100
        return rows

    assert answers_read_back(pd.DataFrame(session("a", True) + session("b", True))) is True
    assert answers_read_back(pd.DataFrame(session("a", False) + session("b", False))) is False
    assert answers_read_back(pd.DataFrame(session("a", False))) is None   # 5 pairs: too few to say
    assert answers_read_back(pd.DataFrame([{"status": "ok"}])) is None


def test_a_tool_round_does_not_teach_the_front_end_its_decode_time():
    from reports.predict.evidence import _join_engine_requests

    ok = pd.DataFrame([dict(level="c=1", response_id="a", t_start=0.0, ttft_s=0.3, e2e_s=0.4, tool_calls=1),
                       dict(level="c=1", response_id="b", t_start=1.0, ttft_s=0.01, e2e_s=0.1, tool_calls=0),
                       dict(level="c=1", response_id="c", t_start=2.0, ttft_s=0.01, e2e_s=0.1, tool_calls=None)])
    engine = pd.DataFrame([dict(response_id=r, t_arrival=t, t_first_token=t + 0.005, t_finish=t + 0.09)
                           for r, t in (("a", 0.0), ("b", 1.0), ("c", 2.0))])
    joined = _join_engine_requests(ok, engine)["c=1"]
    assert sorted(joined["response_id"]) == ["b", "c"]


def test_a_hedged_levels_pairs_counted_once():
    from reports.hedging import hedge_stats

    frame = pd.DataFrame([dict(hedge=None, status="ok"), dict(hedge=None, status="http_503"),
                          dict(hedge="primary", status="ok"), dict(hedge="copy", status="cancelled"),
                          dict(hedge="primary", status="cancelled"), dict(hedge="copy", status="ok")])
    stats = hedge_stats(frame)
    assert (stats.requests, stats.hedged, stats.copies_kept, stats.cancelled) == (4, 2, 1, 2)
    assert stats.hedged_share == 0.5 and stats.extra_requests == 0.5
    assert hedge_stats(pd.DataFrame([dict(hedge=None, status="ok")])) is None
