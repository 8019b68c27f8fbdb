"""The non-LLM model: a small seeded tabular classifier (MLP), served over KServe V2.

It stands in for the "classic" models Triton serves with dynamic batching: a fixed-size
feature vector in, class probabilities out, cost dominated by per-call overhead, so
batching pays. Weights are random but seeded: the same seed gives the same model and
the same predictions on every machine.

    features [B, F] -> Linear(F, H) -> GELU -> Linear(H, H) -> GELU -> Linear(H, C) -> softmax -> [B, C]
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from reference_server.classifier.config import ClassifierConfig


class TabularClassifier(nn.Module):
    """The MLP above, with weights drawn from `seed` (no global RNG touched)."""

    def __init__(self, num_features: int, num_classes: int, hidden_size: int, seed: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(num_features, hidden_size), nn.GELU(),
            nn.Linear(hidden_size, hidden_size), nn.GELU(),
            nn.Linear(hidden_size, num_classes),
        )
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for layer in self.net:
                if isinstance(layer, nn.Linear):
                    # scaled like PyTorch's default init, but from our own generator
                    bound = layer.in_features ** -0.5
                    layer.weight.copy_(torch.empty_like(layer.weight).uniform_(-bound, bound, generator=generator))
                    layer.bias.copy_(torch.empty_like(layer.bias).uniform_(-bound, bound, generator=generator))
        self.eval()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # features: [B, F] float32 -> probabilities: [B, C]
        return torch.softmax(self.net(features), dim=-1)

    @classmethod
    def from_config(cls, config: ClassifierConfig) -> TabularClassifier:
        return cls(config.num_features, config.num_classes, config.hidden_size, config.seed)

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """rows: [B, F] float32 -> probabilities [B, C] float32 (numpy in, numpy out)."""
        with torch.inference_mode():
            return self(torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))).numpy()
