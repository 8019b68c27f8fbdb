# Entry points: `make demo`, `make test` and `make test-fast` (the tests that start no process).
# All build .venv from nothing but python3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test test-fast browsers

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall when the dependency list or the pins change.
$(STAMP): $(PY) pyproject.toml constraints.txt
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The browser tests drive Debian's Chromium through its chromedriver. As root with apt-get, install
# them when absent; otherwise (or if that fails) those tests skip and say why.
browsers:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || \
	  echo "Chromium/chromedriver not installed: the browser tests will skip"; }

test: $(STAMP) browsers
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

demo: $(STAMP)
	$(PY) -m servecap demo
