"""The chat template: messages -> prompt token ids, using the tokenizer's special ids.

    <|bos|> ( <|role|> content-bytes <|end|> )* <|assistant|>

`role` is `system` (also used for OpenAI's `developer`), `user` or `assistant`; content is
its UTF-8 bytes, one id per byte. So a chat prompt's token count is exactly
`2 + sum(2 + len(content.encode("utf-8")) for each message)`: the usage the API reports.
"""

from __future__ import annotations

from reference_server.engine.tokenizer import ByteTokenizer

# OpenAI role -> the special token that opens the turn
ROLE_TOKENS = {
    "system": "<|system|>",
    "developer": "<|system|>",
    "user": "<|user|>",
    "assistant": "<|assistant|>",
}


def render_chat(tokenizer: ByteTokenizer, messages: list[tuple[str, str]]) -> list[int]:
    """Prompt ids for `messages` as (role, text) pairs, ending with the assistant's turn opener."""
    special = tokenizer.special_ids
    ids = [tokenizer.bos_id]
    for role, text in messages:
        if role not in ROLE_TOKENS:
            raise ValueError(f"unsupported chat role {role!r}; use one of {sorted(ROLE_TOKENS)}")
        ids.append(special[ROLE_TOKENS[role]])
        ids.extend(tokenizer.encode(text))
        ids.append(special["<|end|>"])
    ids.append(special["<|assistant|>"])
    return ids
