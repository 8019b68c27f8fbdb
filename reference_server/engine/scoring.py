"""Teacher-forced scoring: a model's next-token log-probabilities at every position of a given sequence.

    sequence_log_probs(runner, token_ids) -> [T, vocab] float32: row i is log p(. | token_ids[:i + 1])

One prefill pass over the whole sequence, on a scratch KV cache of its own (the engine's cache and
its block tables are left alone), through the same model, weights (quantized ones included) and
attention code the engine serves with. Quality measures (`servecap quality`) read a configuration's
distributions from here: they must be the served model's, not a copy's.
"""

from __future__ import annotations

import torch

from reference_server.engine.model_runner import ModelRunner


@torch.inference_mode()
def sequence_log_probs(runner: ModelRunner, token_ids: list[int]) -> torch.Tensor:
    """log-softmax of the next-token logits after each prefix of `token_ids`, over the usable vocab."""
    if not token_ids:
        raise ValueError("token_ids is empty: at least one token is needed")
    arch, bs = runner.arch, runner.block_size
    num_blocks = -(-len(token_ids) // bs)
    kv_cache = torch.zeros(arch.num_layers, 2, arch.num_kv_heads, num_blocks * bs, arch.head_dim,
                           dtype=runner.dtype, device=runner.device)   # [layers, 2, K, slots, d]
    meta = runner.attention_planner.plan([list(range(num_blocks))], [0], [len(token_ids)], 0)
    to = dict(device=runner.device, dtype=torch.long)
    if runner.lora is not None:   # the base model's distributions: no adapter rows
        runner.lora.step.segments = []
    hidden = runner.model(torch.tensor(token_ids, **to), torch.arange(len(token_ids), **to), kv_cache, meta)
    logits = runner.model.compute_logits(hidden)[:, : runner.usable_vocab]
    return torch.log_softmax(logits.float(), dim=-1).cpu()
