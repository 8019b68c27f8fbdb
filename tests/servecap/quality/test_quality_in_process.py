"""`servecap quality` in-process: the real engines, the teacher-forced scorer, and a broken quantization caught."""

from __future__ import annotations

import json

import pytest
import torch

from reference_server.engine.quantization import Int8Linear
from servecap.quality.cli import main, seeded_prompts
from servecap.quality.in_process import compare_engines, engine_from_args, greedy_outputs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _prompts(engine, count=6):
    return [engine.tokenizer.encode(p, add_bos=True) for p in seeded_prompts(count, 24, seed=3)]


def test_the_scorer_agrees_with_the_engine_that_served_the_tokens():
    """Teacher-forced on A's own greedy output, A's argmax is A's token everywhere: the scorer reads the
    served model's distributions (and B = the same configuration has no KL)."""
    a, b = engine_from_args("", "tiny"), engine_from_args("", "tiny")
    result = compare_engines(a, b, _prompts(a), 16)
    m = result["measures"]
    assert m["top1_agreement"]["mean"] == 1.0 and m["prefix_agreement"]["mean"] == 1.0
    assert m["identical_outputs"] == 1.0
    assert m["kl_mean"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert len(result["per_prompt"]) == 6 and not a.has_unfinished_requests()


def test_int8_moves_the_distributions_a_little_and_broken_scales_are_caught():
    a = engine_from_args("", "tiny")
    int8 = engine_from_args("--quantization int8", "tiny")
    broken = engine_from_args("--quantization int8", "tiny")
    with torch.no_grad():
        for module in broken.runner.model.modules():
            if isinstance(module, Int8Linear):
                module.scales.zero_()   # a quantizer bug: every linear layer outputs zeros
    prompts = _prompts(a, 8)
    good = compare_engines(a, int8, prompts, 16)["measures"]
    bad = compare_engines(a, broken, prompts, 16)["measures"]
    assert 0 < good["kl_mean"]["mean"] < 1e-3 and good["top1_agreement"]["mean"] > 0.9
    assert bad["kl_mean"]["mean"] > 100 * good["kl_mean"]["ci95"][1]
    assert bad["top1_agreement"]["ci95"][1] < good["top1_agreement"]["ci95"][0]


def test_prompts_from_a_text_are_seeded_windows_starting_at_lines():
    text = "".join(f"line {i}: some words here\n" for i in range(200))
    prompts = seeded_prompts(5, 40, seed=1, source=text)
    assert prompts == seeded_prompts(5, 40, seed=1, source=text) != seeded_prompts(5, 40, seed=2, source=text)
    assert all(p.startswith("line ") and len(p) == 40 and p in text for p in prompts)
    with pytest.raises(ValueError, match="too few for prompts of 40"):
        seeded_prompts(1, 40, seed=0, source="short")


def test_greedy_outputs_have_the_asked_length_whatever_the_end_of_sequence():
    engine = engine_from_args("--max-num-seqs 2", "tiny")   # more prompts than seats: they queue
    outputs = greedy_outputs(engine, _prompts(engine, 5), 9)
    assert [len(o) for o in outputs] == [9] * 5


def test_the_cli_writes_the_result_with_perplexity_on_held_out_text(tmp_path, capsys):
    text = tmp_path / "held_out.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 20)
    out = tmp_path / "run" / "quality.json"
    assert main(["--a-args", "", "--b-args", "--quantization int8", "--prompts", "4", "--prompt-tokens", "16",
                 "--max-tokens", "8", "--text", str(text), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["mode"] == "in-process" and result["b"]["engine"]["quantization"] == "int8"
    assert result["b"]["engine"]["weight_bytes"] < result["a"]["engine"]["weight_bytes"]
    ppl_a, ppl_b = result["measures"]["perplexity_a"], result["measures"]["perplexity_b"]
    assert ppl_a["n"] == ppl_b["n"] >= 3 and 200 < ppl_a["mean"] < 300   # random weights: about the vocabulary
    assert "top1_agreement" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--b-args", ""], "arm A: give exactly one of --a-args and --a-url"),
    (["--a-args", "", "--a-url", "http://127.0.0.1:1", "--b-args", ""], "arm A: give exactly one"),
    (["--a-args", "", "--b-url", "http://127.0.0.1:1"], "give both arms as"),
    (["--a-args", "", "--b-args", "", "--logprobs", "5"], "--logprobs is for endpoints"),
    (["--a-url", "http://127.0.0.1:1", "--b-url", "http://127.0.0.1:1", "--text", __file__], "--text (perplexity)"),
    (["--a-args", "", "--b-args", "", "--prompts", "0"], "--prompts must be at least 1"),
    (["--a-args", "", "--b-args", "--emulate h100-sxm --model llama-3.1-8b"], "an emulated GPU"),
    (["--a-args", "", "--b-args", "--quantization int4"], "--quantization"),
    (["--a-args", "", "--b-args", "", "--text", "/nonexistent/held_out.txt"], "--text /nonexistent/held_out.txt: no"),
    (["--a-args", "", "--b-args", "", "--prompt-text", "/nonexistent/p.txt"], "--prompt-text /nonexistent/p.txt: no"),
])
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
