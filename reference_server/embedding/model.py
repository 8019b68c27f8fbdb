"""A small seeded text encoder: bytes in, a unit-length vector out, batched with padding.

    ids [B, L] (UTF-8 bytes) -> byte + position embeddings -> `layers` transformer encoder layers
    (padding masked) -> mean over the real tokens -> L2 normalise -> [B, dim]

Weights are random but seeded, so every machine serves the same embeddings. It stands in for the
embedding models (BGE, E5, MiniLM) served behind Triton, TEI or vLLM: its cost grows with the batch's
tokens, so a batch of short inputs pays, and padding a long one into it costs.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from reference_server.embedding.config import EmbeddingConfig

VOCAB = 256   # bytes


class TextEncoder(nn.Module):
    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(config.seed)
        self.tokens = nn.Embedding(VOCAB, config.dim)
        self.positions = nn.Embedding(config.max_input_tokens, config.dim)
        layer = nn.TransformerEncoderLayer(config.dim, config.heads, 2 * config.dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        with torch.no_grad():   # every parameter from our own generator (or constant): no global RNG touched
            for name, parameter in self.named_parameters():
                if parameter.dim() > 1:
                    bound = parameter.shape[-1] ** -0.5
                    parameter.copy_(torch.empty_like(parameter).uniform_(-bound, bound, generator=generator))
                else:   # biases 0, norms' scales 1
                    parameter.fill_(0.0 if name.endswith("bias") else 1.0)
        self.eval()

    def forward(self, ids: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        # ids: [B, L] int64; pad: [B, L] bool, True where there is no token -> [B, dim] unit vectors
        positions = torch.arange(ids.shape[1], device=ids.device)
        hidden = self.encoder(self.tokens(ids) + self.positions(positions)[None], src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return nn.functional.normalize(pooled, dim=-1)

    def embed(self, inputs: list[np.ndarray]) -> np.ndarray:
        """Token-id arrays of any lengths (1..max_input_tokens) -> float32 [len(inputs), dim]."""
        longest = max(len(ids) for ids in inputs)
        ids = np.zeros((len(inputs), longest), dtype=np.int64)
        pad = np.ones((len(inputs), longest), dtype=bool)
        for row, tokens in enumerate(inputs):
            ids[row, :len(tokens)] = tokens
            pad[row, :len(tokens)] = False
        with torch.inference_mode():
            return self(torch.from_numpy(ids), torch.from_numpy(pad)).numpy()
