"""The byte-level model trained on local text: a fixed split, a loss that falls, and a checkpoint the engine
serves with the distributions the training forward computed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine_core.architecture import ModelArchitecture
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from reference_server.engine.scoring import sequence_log_probs
from reference_server.training.corpus import stdlib_corpus
from reference_server.training.train import dense_logits, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SMALL = ModelArchitecture(name="probe", num_layers=2, hidden_size=64, num_heads=4, num_kv_heads=2, head_dim=16,
                          intermediate_size=128, vocab_size=264, tie_embeddings=False, max_position_embeddings=256,
                          rope_theta=10000.0, norm_eps=1e-5)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("lib")
    for i in range(40):
        (root / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x * {i} + 1\n" * 20)
    (root / "test").mkdir()
    (root / "test" / "test_x.py").write_text("left out\n")
    return root


def test_the_split_is_fixed_by_file_names_and_leaves_tests_out(source):
    first, again = stdlib_corpus(root=str(source)), stdlib_corpus(root=str(source))
    assert first == again and first.files == 40 and 0 < first.held_out_files < 40
    assert b"left out" not in first.train + first.held_out
    with pytest.raises(ValueError, match="is not at"):
        stdlib_corpus(root=str(source / "missing"))


def test_training_lowers_the_loss_and_the_engine_serves_the_same_distributions(source, tmp_path):
    out = tmp_path / "ckpt"
    report = train(out, minutes=1.0, max_steps=60, batch=8, context=64, lr=3e-3, seed=0, threads=1,
                   log=lambda line: None, arch=SMALL, corpus_root=str(source))
    curve = report["loss_curve_bits_per_byte"]
    assert curve[-1][2] < 0.6 * curve[0][2] and report["held_out_bits_per_byte"] < 5.0
    assert json.loads((out / "training.json").read_text())["steps"] == 60
    engine = Engine(EngineConfig.from_flags(model=str(out), max_model_len=256))
    ids = [engine.tokenizer.bos_id, *engine.tokenizer.encode("def f3(x):\n    return x * 3 + 1\n")]
    served = sequence_log_probs(engine.runner, ids).numpy()
    from reference_server.engine.checkpoint import load_checkpoint
    from reference_server.engine.model import Transformer

    arch, state = load_checkpoint(out)
    model = Transformer(arch, 256)
    model.load_state_dict(state)
    with torch.no_grad():
        dense = torch.log_softmax(dense_logits(model, torch.tensor([ids])).float(), -1)[0, :, :264].numpy()
    assert np.abs(served - dense).max() < 1e-4
