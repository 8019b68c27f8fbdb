"""Multi-turn conversations: what each turn sends (the whole history so far) and the lengths it asks.

A conversation is a plan of user turns (from a dataset's conversation, or synthetic text of
`--prompt-tokens` length) and, after each answer, the history grows by the server's *actual*
answer, so turn k sends system + (user, assistant) x (k - 1) + user_k: the prefix cache of the
server sees what a chat client would give it.

    plan = ConversationPlan(system=None, users=("hi", "more"), output_tokens=(8, None))
    history = ConversationHistory(plan)
    history.messages(0)      # [{"role": "user", "content": "hi"}]
    history.answered("hello")
    history.messages(1)      # [user hi, assistant hello, user more]

Pure: no locust or gevent.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConversationPlan:
    users: tuple[str, ...]                    # one user message per turn
    output_tokens: tuple[int | None, ...]     # per turn: the data's answer length, None: the run's --output-tokens
    system: str | None = None
    reasoning_tokens: tuple[int | None, ...] = ()   # per turn: the data's reasoning length (of the output),
                                                    # None: the run's --reasoning-tokens; (): none for any turn

    def __post_init__(self) -> None:
        if not self.users or len(self.users) != len(self.output_tokens):
            raise ValueError("a conversation plan needs one output length per user turn, and at least one turn")
        if self.reasoning_tokens and len(self.reasoning_tokens) != len(self.users):
            raise ValueError("a conversation plan's reasoning lengths need one per user turn")

    def reasoning_at(self, turn: int) -> int | None:
        """The data's reasoning length for `turn` (0-based), None where it has none."""
        return self.reasoning_tokens[turn] if self.reasoning_tokens else None

    @property
    def turns(self) -> int:
        return len(self.users)


@dataclass
class ConversationHistory:
    plan: ConversationPlan
    answers: list[str] = field(default_factory=list)   # the server's answers so far, in turn order

    def messages(self, turn: int) -> list[dict]:
        """Turn `turn` (0-based): the system text, every earlier turn with its actual answer, this user turn."""
        if turn != len(self.answers):
            raise ValueError(f"turn {turn} asked after {len(self.answers)} answers: turns run in order")
        out = [{"role": "system", "content": self.plan.system}] if self.plan.system else []
        for user, answer in zip(self.plan.users, self.answers):
            out += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        return out + [{"role": "user", "content": self.plan.users[turn]}]

    def answered(self, text: str) -> None:
        self.answers.append(text)


