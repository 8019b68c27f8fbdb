"""The real-engine suite (`make test-engines`): vLLM's CPU build and the reference server on one checkpoint, and
vLLM's router in its disaggregated mode in front of emulated workers.

Tests here are marked `engine` (and `slow`: they start processes). They run only when asked for
with `-m engine`; any other run deselects them, so `make test` needs no vLLM. vLLM runs from
`.venv-vllm` (what `make test-engines` installs; SERVECAP_VLLM_PYTHON names another interpreter),
the servecap side from the interpreter running pytest. Session fixtures: the tiny checkpoint
(built by lab/servecap/tiny_llama.py with .venv-vllm's transformers), one vLLM server and one
reference server serving it, both on 127.0.0.1 ports of their own; and the checkpoint built as a
reasoning model, with a vLLM server that parses its reasoning.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vllm_env import OFFLINE, REPO, VLLM_ARGS, VLLM_KV_GIB, VLLM_PYTHON


def pytest_collection_modifyitems(config, items):
    """Deselect the engine tests unless the run selects them by marker (`-m engine`)."""
    if "engine" in (config.getoption("markexpr") or ""):
        return
    deselected = [item for item in items if item.get_closest_marker("engine")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker("engine")]


def _build_checkpoint(out: Path, *flags: str) -> Path:
    if not VLLM_PYTHON.exists():
        pytest.fail(f"{VLLM_PYTHON} is missing: `make test-engines` creates .venv-vllm (vLLM's CPU build)")
    result = subprocess.run([str(VLLM_PYTHON), str(REPO / "lab" / "servecap" / "tiny_llama.py"), str(out), *flags],
                            capture_output=True, text=True, timeout=300, env={**os.environ, **OFFLINE})
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _vllm(model_dir: Path, log_dir: Path, *flags: str):
    from servecap.launch.command import CommandSpec
    from servecap.launch.process import ServerProcess

    spec = CommandSpec((str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                        "--host", "127.0.0.1", "--port", "{port}", *VLLM_ARGS, *flags), ready_path="/v1/models")
    return ServerProcess(spec, log_path=log_dir / "vllm.log", startup_timeout_s=420,
                         env={**OFFLINE, "VLLM_CPU_KVCACHE_SPACE": VLLM_KV_GIB})


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Path:
    return _build_checkpoint(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def vllm_server(checkpoint, tmp_path_factory):
    """vLLM serving the checkpoint; it calls tools as its Hermes parser reads them (tool_choice "required" is
    then guided decoding) and its usage says the prompt tokens its prefix cache served."""
    with _vllm(checkpoint, tmp_path_factory.mktemp("vllm"), "--enable-auto-tool-choice", "--tool-call-parser",
               "hermes", "--enable-prompt-tokens-details") as server:
        yield server


@pytest.fixture(scope="session")
def reasoning_checkpoint(tmp_path_factory) -> Path:
    """The tiny checkpoint as a reasoning model (tiny_llama.py --reasoning: it closes its reasoning with </think>)."""
    return _build_checkpoint(tmp_path_factory.mktemp("tiny-reasoner"), "--reasoning")


@pytest.fixture(scope="session")
def vllm_reasoner(reasoning_checkpoint, tmp_path_factory):
    """vLLM serving it with DeepSeek-R1's reasoning parser (everything before </think> is reasoning)."""
    with _vllm(reasoning_checkpoint, tmp_path_factory.mktemp("vllm-reasoner"), "--reasoning-parser",
               "deepseek_r1") as server:
        yield server


@pytest.fixture(scope="session")
def reference_server(checkpoint):
    from servecap.launch.process import ServerProcess
    from servecap.launch.spec import ReferenceServerSpec

    spec = ReferenceServerSpec.from_flags(["--model", str(checkpoint), "--dtype", "float32",
                                           "--served-model-name", "tiny", "--strategy", "continuous"])
    with ServerProcess(spec, startup_timeout_s=300) as server:
        yield server

