"""Build the real-engine suite's checkpoint: a tiny random Llama and its own byte-level BPE tokenizer.

    .venv-vllm/bin/python lab/servecap/tiny_llama.py OUT_DIR [--reasoning]

Run with `.venv-vllm`'s Python (it has transformers and tokenizers; servecap's .venv does not).
Nothing is downloaded: the tokenizer is trained here on generated text, the weights are seeded
random, and both are written with `save_pretrained`, so OUT_DIR is an ordinary Hugging Face
checkpoint directory that vLLM and `servecap serve --model OUT_DIR` both load.

The model: LlamaForCausalLM, hidden 128, 2 layers, 2 attention heads, 1 KV head, head_dim 64,
float32. Weights are drawn wider than Llama's usual init (std 0.2, not 0.02), so greedy
decoding's top logit stands clear of the runner-up and two correct implementations agree
token for token instead of flipping on float rounding.

`--reasoning` makes it a reasoning model for vLLM's `--reasoning-parser deepseek_r1`: the tokenizer
gains `<think>` and `</think>` (added tokens that decode to their text, as DeepSeek-R1's do), its chat
template opens `<think>` after the assistant's turn begins (as R1's does, so the model never emits
it), and the model emits `</think>` wherever greedy decoding would have emitted the token found in
the most of its replies to seeded chat prompts, or nearly: its lm_head row is that token's, scaled
up. So a reply reasons for some tokens (how many depends on its prompt), closes its reasoning, and
answers, as R1 does. Its generation_config samples with top_k 1 (greedy), so a client that sends no
temperature gets that too.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

SPECIAL_TOKENS = ["<|bos|>", "<|eos|>", "<|pad|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
VOCAB_SIZE = 512
MAX_POSITIONS = 1024
SEED = 0
# <|bos|> (<|role|> content <|end|>)* <|assistant|>: the shape of servecap's own chat template
CHAT_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{{ '<|' + message['role'] + '|>' }}"
                 "{{ message['content'] }}{{ '<|end|>' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}")


def training_text(lines: int = 2000) -> list[str]:
    """Seeded pseudo-English, so the merges (and the vocabulary) are the same on every machine."""
    rng = random.Random(SEED)
    words = ("the of and to in is that it for on with as was at by an be this from or have not are but "
             "load test server token batch cache queue latency model engine request stream prefill decode "
             "capacity plan measure report level throughput").split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 16))) for _ in range(lines)]


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>", model_max_length=MAX_POSITIONS)
    fast.chat_template = CHAT_TEMPLATE
    return fast


THINK_TOKENS = ("<think>", "</think>")
END_THINK_SCALE = 1.2    # </think>'s logit over the token it copies: it wins where that token is the top, or near it
COMMONEST_PROMPTS = 32


def build(out_dir: Path, reasoning: bool = False) -> Path:
    import torch
    from tokenizers import AddedToken
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    if reasoning:
        tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in THINK_TOKENS])
        tokenizer.chat_template = CHAT_TEMPLATE.replace("'<|assistant|>' }}{% endif %}",
                                                        "'<|assistant|>' + '<think>\\n' }}{% endif %}")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                         max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-5, tie_word_embeddings=False,
                         initializer_range=0.2, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    if reasoning:
        _end_thinking_where_the_commonest_token_was(model, tokenizer)
        # sampled as greedy by default (vLLM takes a checkpoint's generation_config as its defaults): how long a
        # reply reasons is then its prompt's doing, not a draw that seldom reaches </think> on a random model
        model.generation_config.do_sample, model.generation_config.top_k = True, 1
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def _end_thinking_where_the_commonest_token_was(model, tokenizer) -> None:
    """Give </think> the lm_head row, scaled up, of the token found in the most greedy replies to seeded chat
    prompts (each opening <think> as the template does), so most replies reach </think> at a place of their own."""
    import torch

    replies_with: dict[int, int] = {}
    special = set(tokenizer.all_special_ids)
    with torch.no_grad():
        for line in training_text(COMMONEST_PROMPTS):
            ids = tokenizer.apply_chat_template([{"role": "user", "content": line}], add_generation_prompt=True,
                                                return_tensors="pt", return_dict=True)["input_ids"]
            out = model.generate(ids, max_new_tokens=48, do_sample=False, pad_token_id=tokenizer.pad_token_id)
            for token in set(out[0, ids.shape[1]:].tolist()) - special:
                replies_with[token] = replies_with.get(token, 0) + 1
        commonest = max(sorted(replies_with), key=lambda t: replies_with[t])
        end = tokenizer.convert_tokens_to_ids(THINK_TOKENS[1])
        model.lm_head.weight[end] = model.lm_head.weight[commonest] * END_THINK_SCALE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--reasoning", action="store_true", help="add <think>/</think> and emit </think> (module doc)")
    args = parser.parse_args()
    print(build(args.out_dir, reasoning=args.reasoning))


if __name__ == "__main__":
    main()
