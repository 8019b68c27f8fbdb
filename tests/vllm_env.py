"""Where the real-engine suite finds vLLM's CPU build, and how it runs it (offline, its KV memory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("SERVECAP_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
VLLM_ARGS = ("--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager",
             "--max-num-seqs", "8")
VLLM_KV_GIB = "1"   # VLLM_CPU_KVCACHE_SPACE: the KV memory vLLM's CPU build allocates


def servecap(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`servecap ARGS` with the interpreter running the tests (the normal .venv): the suite's servecap side."""
    return subprocess.run([sys.executable, "-m", "servecap", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
