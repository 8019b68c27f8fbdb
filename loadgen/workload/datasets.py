"""Prompts from a local dataset file (`--dataset PATH`): ShareGPT JSON, OpenAI chat JSONL, prompt JSONL.

Formats (told apart by the file's first character and each line's keys):

    ShareGPT JSON        [{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}, ...]
                         ("from": human|user, gpt|assistant|chatgpt|bard|bing|model, system)
    OpenAI chat JSONL    {"messages": [{"role": "system"|"user"|"assistant", "content": str | [{"type": "text", ...}]}]}
                         (an assistant message's "reasoning_content" or "reasoning": its reasoning)
    prompt JSONL         {"prompt": "...", "output_tokens": N, "reasoning_tokens": R}   (both optional)

Each entry becomes a `Conversation`: an optional system text and its (user, reply) turns;
`conversation_plan` turns it into what is sent (loadgen.workload.conversations). A single-turn
request sends the system text and the first user turn; a turn's output length is the entry's
`output_tokens`, else that turn's reply length in estimated tokens, else the run's
`--output-tokens`. Entries without a user turn are skipped and counted (`Dataset.skipped`).

A reply that carries reasoning (a reasoning model's: an assistant message's `reasoning_content` or
`reasoning`, or a reply that opens with `<think>...</think>`, as DeepSeek-R1's and Qwen3's raw text
does) gives its turn a reasoning length, and the turn's output length is the reasoning's plus the
answer's, as a reasoning model's server counts them; the request then asks for that much reasoning
(`reasoning_tokens`, the reference server's budget).
A turn of a multi-turn run sends the whole history, with the server's own earlier answers.

Lengths are estimated without a tokenizer: ceil(UTF-8 bytes / chars_per_token). The default 4
is typical of English BPE tokenizers (vLLM, TGI); the reference server's tokenizer is
byte-level, so 1 gives its exact lengths. The server's `usage` is recorded either way.

Sampling is seeded: with replacement each request draws an entry from its own RNG; without
replacement every process walks its share of one seeded permutation (entry i of the deck to
process i % processes), reshuffled for each pass once the deck is used up.

Pure: no locust or gevent; a bad file raises ValueError naming the file and the line (JSONL)
or the entry (ShareGPT JSON).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.client.sse import REASONING_KEYS   # a message's reasoning goes by a delta's names
from loadgen.workload.conversations import ConversationPlan
from loadgen.workload.input_files import jsonl_objects, read_input_text

DEFAULT_CHARS_PER_TOKEN = 4.0
SAMPLINGS = ("with-replacement", "without-replacement")
_USER = {"human", "user"}
_ASSISTANT = {"gpt", "assistant", "chatgpt", "bard", "bing", "model"}


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class Turn:
    user: str
    reply: str | None = None      # the dataset's answer (None: the data has none)
    reasoning: str | None = None  # the reasoning before that answer (None: the data has none)


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Turn, ...]
    system: str | None = None
    output_tokens: int | None = None   # stated by the data (prompt JSONL), else estimated from replies
    reasoning_tokens: int | None = None   # stated by the data (prompt JSONL), else estimated from the reasoning


@dataclass(frozen=True)
class Dataset:
    path: str
    format: str                                  # "sharegpt" | "openai-chat" | "prompt"
    conversations: tuple[Conversation, ...] = field(repr=False)
    skipped: int = 0                             # entries without any user turn


def estimate_tokens(text: str, chars_per_token: float) -> int:
    """ceil(UTF-8 bytes / chars_per_token), at least 1."""
    return max(1, math.ceil(len(text.encode()) / chars_per_token))


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a dataset file; ValueError naming the file and line (or entry) when it is bad."""
    path = Path(path)
    text = read_input_text(path, "--dataset")
    stripped = text.lstrip()
    if not stripped:
        raise ValueError(f"--dataset: {path} is empty")
    if stripped[0] == "[":
        return _from_sharegpt_json(path, text)
    return _from_jsonl(path, text)


def _from_sharegpt_json(path: Path, text: str) -> Dataset:
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--dataset: {path}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})") from None
    conversations, skipped = [], 0
    for number, entry in enumerate(entries, start=1):
        where = f"{path}: entry {number}"
        if not isinstance(entry, dict) or not isinstance(entry.get("conversations"), list):
            raise ValueError(f"--dataset: {where} has no \"conversations\" list (ShareGPT format)")
        conversation = _sharegpt_conversation(entry["conversations"], where)
        if conversation is None:
            skipped += 1
        else:
            conversations.append(conversation)
    return _dataset(path, "sharegpt", conversations, skipped)


def _from_jsonl(path: Path, text: str) -> Dataset:
    conversations, skipped, formats = [], 0, set()
    for where, row in jsonl_objects(path, text, "--dataset"):
        if "messages" in row:
            formats.add("openai-chat")
            conversation = _chat_conversation(row["messages"], where)
        elif "prompt" in row:
            formats.add("prompt")
            conversation = _prompt_conversation(row, where)
        elif "conversations" in row:
            formats.add("sharegpt")
            conversation = _sharegpt_conversation(row["conversations"], where)
        else:
            raise ValueError(f"--dataset: {where}: expected a \"messages\" (OpenAI chat) or \"prompt\" key")
        if conversation is None:
            skipped += 1
        else:
            conversations.append(conversation)
    return _dataset(path, "+".join(sorted(formats)) or "prompt", conversations, skipped)


def _dataset(path: Path, fmt: str, conversations: list[Conversation], skipped: int) -> Dataset:
    if not conversations:
        raise ValueError(f"--dataset: {path} holds no usable entry (a user turn is needed; {skipped} skipped)")
    return Dataset(str(path), fmt, tuple(conversations), skipped)


def _sharegpt_conversation(messages: Any, where: str) -> Conversation | None:
    if not isinstance(messages, list):
        raise ValueError(f"--dataset: {where}: \"conversations\" is not a list")
    pairs = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("value"), str) or "from" not in message:
            raise ValueError(f"--dataset: {where}: message {i + 1} needs \"from\" and a string \"value\"")
        pairs.append((_role(message["from"], where, i), message["value"], None))
    return _conversation(pairs)


def _chat_conversation(messages: Any, where: str) -> Conversation | None:
    if not isinstance(messages, list):
        raise ValueError(f"--dataset: {where}: \"messages\" is not a list")
    pairs = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise ValueError(f"--dataset: {where}: message {i + 1} needs a \"role\" and a \"content\"")
        role = _role(message["role"], where, i)
        reasoning = next((message[key] for key in REASONING_KEYS if isinstance(message.get(key), str)), None)
        pairs.append((role, _content_text(message.get("content"), where, i), reasoning if role == "assistant" else None))
    return _conversation(pairs)


def _prompt_conversation(row: dict, where: str) -> Conversation:
    prompt, output, reasoning = row["prompt"], row.get("output_tokens"), row.get("reasoning_tokens")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"--dataset: {where}: \"prompt\" must be a non-empty string")
    if output is not None and (isinstance(output, bool) or not isinstance(output, int) or output < 1):
        raise ValueError(f"--dataset: {where}: \"output_tokens\" must be a whole number >= 1, got {output!r}")
    if reasoning is not None and (isinstance(reasoning, bool) or not isinstance(reasoning, int) or reasoning < 0
                                  or (output is not None and reasoning > output)):
        raise ValueError(f"--dataset: {where}: \"reasoning_tokens\" must be a whole number >= 0 and at most "
                         f"\"output_tokens\" (the reasoning is part of the output), got {reasoning!r}")
    return Conversation((Turn(prompt),), output_tokens=output, reasoning_tokens=reasoning)


def _role(value: Any, where: str, index: int) -> str:
    role = str(value).lower()
    if role in _USER:
        return "user"
    if role in _ASSISTANT:
        return "assistant"
    if role == "system":
        return "system"
    raise ValueError(f"--dataset: {where}: message {index + 1} has unknown role {value!r}")


def _content_text(content: Any, where: str, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: the text ones, joined
        return "".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
    raise ValueError(f"--dataset: {where}: message {index + 1} has no text \"content\"")


def _conversation(triples: list[tuple[str, str, str | None]]) -> Conversation | None:
    """(role, text, reasoning) in order -> system text and user/reply turns; consecutive messages of one role
    are joined (their reasoning too); a reply before the first user turn is dropped; None when there is no
    user turn. A reply that opens with <think>...</think> has that part as its reasoning."""
    system = "\n".join(text for role, text, _ in triples if role == "system") or None
    merged: list[list] = []
    for role, text, reasoning in triples:
        if role == "system":
            continue
        if role == "assistant" and reasoning is None:
            reasoning, text = split_think(text)
        if merged and merged[-1][0] == role:
            merged[-1][1] += "\n" + text
            if reasoning is not None:
                merged[-1][2] = reasoning if merged[-1][2] is None else merged[-1][2] + "\n" + reasoning
        else:
            merged.append([role, text, reasoning])
    while merged and merged[0][0] != "user":
        merged.pop(0)
    turns = []
    for i in range(0, len(merged), 2):
        reply, reasoning = (merged[i + 1][1], merged[i + 1][2]) if i + 1 < len(merged) else (None, None)
        turns.append(Turn(merged[i][1], reply, reasoning))
    return Conversation(tuple(turns), system) if turns else None


def split_think(text: str) -> tuple[str | None, str]:
    """(the reasoning, the answer) of a reply that opens with <think>...</think>; (None, text) otherwise."""
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return None, text
    end = stripped.find(THINK_CLOSE)
    if end < 0:   # all of it reasoned: no answer
        return stripped[len(THINK_OPEN):].strip(), ""
    return stripped[len(THINK_OPEN):end].strip(), stripped[end + len(THINK_CLOSE):].lstrip()


class DatasetSampler:
    """Which conversation each request of one process gets (see the module doc for the two samplings)."""

    def __init__(self, dataset: Dataset, *, seed: int, sampling: str = "with-replacement",
                 process_index: int = 0, process_count: int = 1) -> None:
        if sampling not in SAMPLINGS:
            raise ValueError(f"--dataset-sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
        self.dataset = dataset
        self.seed = seed
        self.replacement = sampling == "with-replacement"
        self.process_index, self.process_count = process_index, max(process_count, 1)
        self._taken = 0
        self._decks: dict[int, list[int]] = {}

    def pick(self, rng: random.Random) -> Conversation:
        conversations = self.dataset.conversations
        if self.replacement:
            return conversations[rng.randrange(len(conversations))]
        slot = self._taken * self.process_count + self.process_index   # this process's share of the deck
        self._taken += 1
        n = len(conversations)
        return conversations[self._deck(slot // n)[slot % n]]

    def _deck(self, epoch: int) -> list[int]:
        if epoch not in self._decks:
            self._decks = {epoch: random.Random(f"dataset/{self.seed}/{epoch}").sample(
                range(len(self.dataset.conversations)), len(self.dataset.conversations))}
        return self._decks[epoch]


def conversation_plan(conversation: Conversation, turns: int | None, chars_per_token: float,
                      shared_prefix: str | None = None) -> ConversationPlan:
    """The first `turns` turns (None: all) of a dataset conversation, with its system text after any shared
    prefix; each turn's output length is the data's (stated, else its reply's estimated length, its reasoning
    included) or None, and its reasoning length the data's (stated, else its reasoning's estimated length) or
    None where the data has none."""
    system = "\n".join(text for text in (shared_prefix, conversation.system) if text) or None
    chosen = conversation.turns if turns is None else conversation.turns[:turns]
    reasoning = [estimate_tokens(turn.reasoning, chars_per_token) if turn.reasoning else None for turn in chosen]
    outputs = [None if not turn.reply and not turn.reasoning else
               (estimate_tokens(turn.reply, chars_per_token) if turn.reply else 0) + (thought or 0)
               for turn, thought in zip(chosen, reasoning)]
    if conversation.output_tokens is not None:   # prompt JSONL states it
        outputs[0] = conversation.output_tokens
    if conversation.reasoning_tokens is not None:
        reasoning[0] = conversation.reasoning_tokens
    return ConversationPlan(tuple(turn.user for turn in chosen), tuple(outputs), system, tuple(reasoning))
