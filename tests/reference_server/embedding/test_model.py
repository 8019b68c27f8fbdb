"""The seeded text encoder: the same seed gives the same model whatever the global RNG holds; a padded
batch gives each input the vector it gets alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reference_server.embedding.config import EmbeddingConfig
from reference_server.embedding.model import TextEncoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def ids(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)


def test_the_seed_alone_fixes_the_model():
    torch.manual_seed(1)
    a = TextEncoder(EmbeddingConfig(seed=3)).embed([ids("same text")])
    torch.manual_seed(2)
    b = TextEncoder(EmbeddingConfig(seed=3)).embed([ids("same text")])
    c = TextEncoder(EmbeddingConfig(seed=4)).embed([ids("same text")])
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_a_padded_batch_gives_each_input_its_own_vector():
    model = TextEncoder(EmbeddingConfig(seed=0))
    texts = ["a", "two words", "x" * 200, "a sentence of middling length"]
    batch = model.embed([ids(t) for t in texts])
    single = np.concatenate([model.embed([ids(t)]) for t in texts])
    assert batch.shape == (4, 128)
    np.testing.assert_allclose(batch, single, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("fields, words", [({"dim": 130, "heads": 4}, "multiple of its heads"),
                                           ({"max_batch_size": 0}, "max_batch_size"),
                                           ({"preferred_batch_sizes": (64,)}, "preferred_batch_sizes"),
                                           ({"name": " "}, "name")])
def test_bad_embedding_settings_name_the_field(fields, words):
    with pytest.raises(ValueError, match=words):
        EmbeddingConfig(**fields)
