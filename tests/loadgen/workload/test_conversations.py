"""Multi-turn plans: the history each turn sends, lengths per turn, --turns parsing."""

import json

import pytest

from loadgen.client.sse import answer_text
from contract.workload import parse_turns
from loadgen.workload.conversations import ConversationHistory, ConversationPlan
from loadgen.workload.datasets import Conversation, Turn, conversation_plan


def test_each_turn_sends_the_whole_history_with_the_actual_answers():
    history = ConversationHistory(ConversationPlan(("one", "two", "three"), (None, 5, None), system="sys"))
    assert history.messages(0) == [{"role": "system", "content": "sys"}, {"role": "user", "content": "one"}]
    history.answered("first answer")
    assert history.messages(1) == [{"role": "system", "content": "sys"}, {"role": "user", "content": "one"},
                                   {"role": "assistant", "content": "first answer"}, {"role": "user", "content": "two"}]
    with pytest.raises(ValueError, match="turns run in order"):
        history.messages(2)
    with pytest.raises(ValueError, match="one output length per user turn"):
        ConversationPlan(("a", "b"), (None,))


def test_dataset_plans_take_turns_and_reply_lengths():
    conversation = Conversation((Turn("q1", "a" * 8), Turn("q2", None), Turn("q3", "b" * 4)), system="s")
    plan = conversation_plan(conversation, None, 4.0, shared_prefix="p")
    assert plan.users == ("q1", "q2", "q3") and plan.output_tokens == (2, None, 1) and plan.system == "p\ns"
    assert conversation_plan(conversation, 2, 1.0).output_tokens == (8, None)
    assert conversation_plan(Conversation((Turn("x"),), output_tokens=9), 3, 4.0).output_tokens == (9,)


@pytest.mark.parametrize("value, turns", [("1", 1), (3, 3), ("all", None), ("ALL", None), ("4.0", 4)])
def test_parse_turns(value, turns):
    assert parse_turns(value) == turns


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "many"])
def test_bad_turns_name_the_flag(value):
    with pytest.raises(ValueError, match="--turns"):
        parse_turns(value)


def test_answer_text_joins_streamed_chunks_and_reads_a_whole_body():
    lines = [(0.0, b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n'), (0.1, b"\n"),
             (0.2, b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n'),
             (0.3, b'data: {"choices":[{"text":"lo"}]}\n'), (0.4, b"data: [DONE]\n")]
    assert answer_text(lines, b"", stream=True) == "Hello"
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "whole"}}]}).encode()
    assert answer_text([], body, stream=False) == "whole"
    assert answer_text([], b'{"choices":[{"text":"done"}]}', stream=False) == "done"
    assert answer_text([], b"not json", stream=False) == ""


def test_a_reasoning_models_next_turn_carries_its_answer_not_its_reasoning():
    """The reference server sends reasoning under both of vLLM's keys; neither goes into the history."""
    lines = [(0.1, b'data: {"choices":[{"delta":{"reasoning_content":"hm","reasoning":"hm"}}]}\n'),
             (0.2, b'data: {"choices":[{"delta":{"reasoning":" so"}}]}\n'),
             (0.3, b'data: {"choices":[{"delta":{"content":"Yes"}}]}\n'), (0.4, b"data: [DONE]\n")]
    assert answer_text(lines, b"", stream=True) == "Yes"
    body = json.dumps({"choices": [{"message": {"content": "Yes", "reasoning_content": "hm so"}}]}).encode()
    assert answer_text([], body, stream=False) == "Yes"
