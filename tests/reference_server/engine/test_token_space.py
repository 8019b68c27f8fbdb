"""A Hugging Face checkpoint with its own tokenizer keeps its own ids; presets keep the byte tokenizer's."""

import json
from dataclasses import replace

import pytest

from engine_core.models import get_model
from reference_server.engine.checkpoint import read_architecture, save_checkpoint
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from reference_server.engine.token_space import token_space
from reference_server.engine.tokenizer import ByteTokenizer
from engine_core.scheduling.sampling import SamplingParams

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _hf_checkpoint(path, vocab=421, eos=1):
    """servecap's checkpoint writer, then the config as transformers 5 writes it (rope_parameters, eos) and
    a tokenizer file beside it: what lab/servecap/tiny_llama.py makes, without transformers."""
    arch = replace(get_model("tiny"), vocab_size=vocab, tie_embeddings=False)
    engine = Engine(EngineConfig(model="tiny", dtype="float32"))
    state = engine.runner.model.state_dict()
    import torch
    generator = torch.Generator().manual_seed(0)
    for name in ("embed_tokens.weight", "lm_head.weight"):   # the preset's rows, grown to the checkpoint's vocab
        state[name] = torch.randn(vocab, arch.hidden_size, generator=generator) * 0.2
    save_checkpoint(path, arch, state)
    config = json.loads((path / "config.json").read_text())
    config["rope_parameters"] = {"rope_theta": config.pop("rope_theta"), "rope_type": "default"}
    config["eos_token_id"] = eos
    (path / "config.json").write_text(json.dumps(config))
    (path / "tokenizer.json").write_text("{}")
    return path


def test_presets_and_servecap_checkpoints_use_the_byte_tokenizers_ids(tmp_path):
    tokenizer = ByteTokenizer()
    assert token_space("tiny", tokenizer).vocab_size == 264 and token_space("tiny", tokenizer).eos_id == tokenizer.eos_id
    _hf_checkpoint(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    assert token_space(str(tmp_path), tokenizer).source == "byte tokenizer"


def test_a_checkpoint_with_its_own_tokenizer_samples_its_whole_vocabulary(tmp_path):
    path = _hf_checkpoint(tmp_path)
    space = token_space(str(path), ByteTokenizer())
    assert (space.vocab_size, space.eos_id, space.source) == (421, 1, "checkpoint")
    assert read_architecture(path).rope_theta == 10000.0   # read from rope_parameters
    engine = Engine(EngineConfig(model=str(path), dtype="float32"))
    assert engine.describe()["token_space"] == {"vocab_size": 421, "eos_id": 1, "source": "checkpoint"}
    engine.add_request("a", [300, 400, 420], SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True))
    out = []
    while engine.has_unfinished_requests():
        out += [t for o in engine.step() for t in o.new_token_ids]
    assert len(out) == 64 and max(out) >= 264   # ids the byte tokenizer has no use for are the model's own


def test_an_unsupported_rope_type_is_named(tmp_path):
    path = _hf_checkpoint(tmp_path)
    config = json.loads((path / "config.json").read_text())
    config["rope_parameters"]["rope_type"] = "llama3"
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="rope_type 'llama3'"):
        read_architecture(path)
