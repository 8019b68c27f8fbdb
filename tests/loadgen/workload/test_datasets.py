"""Dataset files: the three formats, lengths from the data, seeded sampling, errors that name the line."""

import json
import random
from collections import Counter

import pytest

from loadgen.workload.datasets import (Conversation, DatasetSampler, Turn, conversation_plan, estimate_tokens,
                                       load_dataset)


def _sharegpt(tmp_path, entries):
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(entries, indent=1))
    return path


def _jsonl(tmp_path, rows, name="data.jsonl"):
    path = tmp_path / name
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_sharegpt_turns_system_and_skipped_entries(tmp_path):
    path = _sharegpt(tmp_path, [
        {"id": "a", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "hi"},
                                      {"from": "gpt", "value": "hello there"}, {"from": "human", "value": "more"},
                                      {"from": "gpt", "value": "ok"}]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "answer without a question"}]},
        {"id": "c", "conversations": [{"from": "gpt", "value": "x"}, {"from": "human", "value": "q1"},
                                      {"from": "human", "value": "q2"}]},
    ])
    data = load_dataset(path)
    assert data.format == "sharegpt" and data.skipped == 1
    first, second = data.conversations
    assert first.system == "be brief"
    assert first.turns == (Turn("hi", "hello there"), Turn("more", "ok"))
    assert second.turns == (Turn("q1\nq2", None),)   # a leading reply dropped, one role's messages joined


def test_openai_chat_and_prompt_jsonl(tmp_path):
    path = _jsonl(tmp_path, [
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "par"}, {"type": "text", "text": "ts"}]},
                      {"role": "assistant", "content": "a" * 40}]},
        "",
        {"prompt": "write a poem", "output_tokens": 7},
        {"prompt": "no length"},
    ])
    data = load_dataset(path)
    assert data.format == "openai-chat+prompt" and len(data.conversations) == 3
    chat, fixed, free = data.conversations
    assert chat.turns == (Turn("parts", "a" * 40),)
    assert conversation_plan(chat, 1, 4.0).output_tokens == (10,)     # 40 bytes / 4 chars per token
    assert conversation_plan(chat, 1, 1.0).output_tokens == (40,)
    assert conversation_plan(fixed, 1, 4.0).output_tokens == (7,)     # stated by the data
    assert conversation_plan(free, 1, 4.0).output_tokens == (None,)   # the run's --output-tokens then


def test_plan_puts_the_shared_prefix_before_the_system_text_and_estimates_lengths():
    conversation = Conversation((Turn("question?", "answer"), Turn("next", "again")), system="sys")
    plan = conversation_plan(conversation, 1, 1.0, shared_prefix="prefix")
    assert plan.system == "prefix\nsys" and plan.users == ("question?",) and plan.output_tokens == (6,)
    assert estimate_tokens("é", 1.0) == 2 and estimate_tokens("abcde", 4.0) == 2 and estimate_tokens("", 4) == 1


@pytest.mark.parametrize("content, message", [
    ('{"messages": [{"role": "user", "content": "ok"}]}\n{"messages": [}\n', r"data.jsonl: line 2: not valid JSON"),
    ('{"prompt": "a"}\n\n{"text": "b"}\n', r"line 3: expected a \"messages\""),
    ('{"prompt": "a", "output_tokens": 0}\n', r"line 1: \"output_tokens\" must be a whole number >= 1"),
    ('{"prompt": ""}\n', r"line 1: \"prompt\" must be a non-empty string"),
    ('{"messages": [{"role": "robot", "content": "x"}]}\n', r"line 1: message 1 has unknown role 'robot'"),
    ('[1, 2]\n', r"entry 1 has no \"conversations\" list"),
    ('{"messages": [{"role": "assistant", "content": "x"}]}\n', "no usable entry"),
    ('   \n', "is empty"),
])
def test_bad_jsonl_names_the_line(tmp_path, content, message):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        load_dataset(path)
    assert str(err.value).startswith("--dataset:")


def test_bad_sharegpt_names_the_entry_or_line(tmp_path):
    path = _sharegpt(tmp_path, [{"conversations": [{"from": "human", "value": "ok"}]}, {"items": []}])
    with pytest.raises(ValueError, match=r"entry 2 has no \"conversations\" list"):
        load_dataset(path)
    path.write_text('[\n {"conversations": []},\n {"conversations": [}\n]')
    with pytest.raises(ValueError, match=r"line 3 column \d+: not valid JSON"):
        load_dataset(path)
    with pytest.raises(ValueError, match="does not exist"):
        load_dataset(tmp_path / "missing.json")


def _dataset(tmp_path, n):
    return load_dataset(_jsonl(tmp_path, [{"prompt": f"p{i}"} for i in range(n)]))


def test_sampling_with_replacement_is_seeded_per_request(tmp_path):
    data = _dataset(tmp_path, 50)
    sampler = DatasetSampler(data, seed=3)
    picks = [sampler.pick(random.Random(f"3/{i}")).turns[0].user for i in range(200)]
    again = [DatasetSampler(data, seed=3).pick(random.Random(f"3/{i}")).turns[0].user for i in range(200)]
    assert picks == again
    assert max(Counter(picks).values()) > 1   # repeats: with replacement


def test_sampling_without_replacement_covers_each_entry_once_per_pass_across_processes(tmp_path):
    data = _dataset(tmp_path, 10)
    processes = [DatasetSampler(data, seed=1, sampling="without-replacement", process_index=i, process_count=3)
                 for i in range(3)]
    rng = random.Random(0)
    first_pass = [processes[slot % 3].pick(rng).turns[0].user for slot in range(10)]
    assert sorted(first_pass) == sorted(f"p{i}" for i in range(10))   # every entry once, no process repeats another's
    second_pass = [processes[slot % 3].pick(rng).turns[0].user for slot in range(10, 20)]
    assert sorted(second_pass) == sorted(first_pass) and second_pass != first_pass   # reshuffled
    with pytest.raises(ValueError, match="--dataset-sampling"):
        DatasetSampler(data, seed=1, sampling="sometimes")


def test_replies_that_carry_reasoning_give_their_turns_a_reasoning_length(tmp_path):
    """A reasoning model's data: an assistant message's reasoning_content (or reasoning), a reply opening with
    <think>...</think>, or a prompt row's reasoning_tokens; the turn's output counts reasoning and answer."""
    path = _jsonl(tmp_path, [
        {"messages": [{"role": "user", "content": "q"},
                      {"role": "assistant", "content": "a" * 8, "reasoning_content": "r" * 32}]},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a" * 8, "reasoning": "r" * 4}]},
        {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "<think>\n" + "t" * 20 +
                                                                                     "\n</think>\n\nthe answer"}]},
        {"prompt": "p", "output_tokens": 50, "reasoning_tokens": 40},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "plain"}]},
    ])
    field, newer, think, stated, plain = load_dataset(path).conversations
    assert field.turns[0] == Turn("q", "a" * 8, "r" * 32) and think.turns[0] == Turn("q", "the answer", "t" * 20)
    plans = [conversation_plan(c, 1, 1.0) for c in (field, newer, think, stated, plain)]
    assert [p.reasoning_at(0) for p in plans] == [32, 4, 20, 40, None]
    assert [p.output_tokens[0] for p in plans] == [40, 12, 30, 50, 5]


@pytest.mark.parametrize("row, message", [
    ({"prompt": "p", "output_tokens": 5, "reasoning_tokens": 6}, "at most \"output_tokens\" .*got 6"),
    ({"prompt": "p", "reasoning_tokens": -1}, "\"reasoning_tokens\" must be a whole number >= 0"),
    ({"prompt": "p", "reasoning_tokens": "many"}, "\"reasoning_tokens\" must be a whole number >= 0"),
])
def test_a_bad_reasoning_length_names_the_line(tmp_path, row, message):
    with pytest.raises(ValueError, match=f"line 1: .*{message}"):
        load_dataset(_jsonl(tmp_path, [row]))
