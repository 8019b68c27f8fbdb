"""Build the real-engine suite's checkpoint: a tiny random Llama and its own byte-level BPE tokenizer.

    .venv-vllm/bin/python servecap/bench/tiny_llama.py OUT_DIR

Run with `.venv-vllm`'s Python (it has transformers and tokenizers; servecap's .venv does not).
Nothing is downloaded: the tokenizer is trained here on generated text, the weights are seeded
random, and both are written with `save_pretrained`, so OUT_DIR is an ordinary Hugging Face
checkpoint directory that vLLM and `servecap serve --model OUT_DIR` both load.

The model: LlamaForCausalLM, hidden 128, 2 layers, 2 attention heads, 1 KV head, head_dim 64,
float32. Weights are drawn wider than Llama's usual init (std 0.2, not 0.02), so greedy
decoding's top logit stands clear of the runner-up and two correct implementations agree
token for token instead of flipping on float rounding.
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


def build(out_dir: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                         max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-5, tie_word_embeddings=False,
                         initializer_range=0.2, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    print(build(parser.parse_args().out_dir))


if __name__ == "__main__":
    main()
