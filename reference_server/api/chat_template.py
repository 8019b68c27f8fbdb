"""The chat template: messages -> prompt token ids, using the tokenizer's special ids.

    <|bos|> ( <|role|> content-bytes <|end|> )* <|assistant|>

`role` is `system` (also used for OpenAI's `developer`), `user` or `assistant`; content is
its UTF-8 bytes, one id per byte. So a chat prompt's token count is exactly
`2 + sum(2 + len(content.encode("utf-8")) for each message)`: the usage the API reports.

Two switches, vLLM's (they are the Hugging Face chat template's arguments):
- `add_generation_prompt` (default true): end with the `<|assistant|>` that opens the
  reply; false leaves it out (one token fewer).
- `continue_final_message`: leave the final message open, without its `<|end|>`, so the
  model continues it (a prefilled reply) instead of starting a new turn. It needs
  `add_generation_prompt` false: a reply opened after an open message would be two turns at once.
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


def render_chat(tokenizer: ByteTokenizer, messages: list[tuple[str, str]], *, add_generation_prompt: bool = True,
                continue_final_message: bool = False) -> list[int]:
    """Prompt ids for `messages` as (role, text) pairs, by default ending with the assistant's turn opener."""
    if continue_final_message and add_generation_prompt:
        raise ValueError("continue_final_message needs add_generation_prompt false")
    special = tokenizer.special_ids
    ids = [tokenizer.bos_id]
    for role, text in messages:
        if role not in ROLE_TOKENS:
            raise ValueError(f"unsupported chat role {role!r}; use one of {sorted(ROLE_TOKENS)}")
        ids.append(special[ROLE_TOKENS[role]])
        ids.extend(tokenizer.encode(text))
        ids.append(special["<|end|>"])
    if continue_final_message and messages:
        ids.pop()   # the final message stays open
    if add_generation_prompt:
        ids.append(special["<|assistant|>"])
    return ids
