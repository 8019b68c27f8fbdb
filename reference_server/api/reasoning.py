"""Reasoning, as reasoning models stream it: a request's first N generated tokens are its reasoning
(`delta.reasoning_content`, and `delta.reasoning` as newer vLLM names it), the rest its answer
(`delta.content`). N is the request's `reasoning_tokens` (servecap's extension field), else a draw
for its `reasoning_effort` (OpenAI's none | minimal | low | medium | high) from the server's
`--reasoning-effort-tokens` map, else a draw from the server's `--reasoning-tokens` distribution;
a draw is capped by max_tokens. What an effort draws is `contract.reasoning_effort`'s map.

The split is by whole engine outputs: a chunk is reasoning while any of the budget is left when it
starts, so with `--stream-interval K` the reasoning may run up to K-1 tokens past N.
`usage.completion_tokens_details.reasoning_tokens` counts the tokens actually sent as reasoning,
which is what a client streaming the response can count.
"""

from __future__ import annotations


class ReasoningSplit:
    """Which of a response's deltas are reasoning, and how many tokens went that way."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.tokens = 0     # generated tokens sent as reasoning so far

    def is_reasoning(self, num_new_tokens: int) -> bool:
        """Classify the next delta (of `num_new_tokens` generated tokens) and count it."""
        if self.tokens < self.budget and num_new_tokens > 0:
            self.tokens += num_new_tokens
            return True
        return False
