# Two entry points: `make demo` (the main job) and `make test` (everything CI runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint unit bench clean browser

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fleet needs Python >= 3.11")'
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "$(PYTHON) cannot create a venv: install its venv module (Debian/Ubuntu: apt-get install python3-venv)"; exit 1; }
	@echo "installing fleet and its Python dependencies into $(VENV) (about a minute, once) ..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

# Builds the upstream binaries on first use (progress every 20 s), then tells the seeds' stories;
# `make demo DEMO_FLAGS=--check` asserts every step instead of pausing between stories.
demo: $(VENV)/.installed
	$(BIN)/fleet demo $(DEMO_FLAGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The dashboard's browser tests drive Debian's headless Chromium (chromium, chromium-driver):
# installed here when missing, as root with apt-get (as on CI; idempotent). Where that cannot
# be done, those tests are skipped and say why.
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium and chromium-driver for the dashboard's browser tests (once) ..."; \
	  { DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	  || echo "could not install chromium: the dashboard's browser tests will be skipped"; \
	else echo "no chromium and chromedriver, and no root apt-get: the dashboard's browser tests will be skipped"; fi

# Lint and types first (seconds), then every test; the sandbox is built on first use.
test: lint browser
	$(BIN)/python -m pytest

# Only the tests that need no sandbox and no Go build (seconds).
unit: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not sandbox and not toolchain"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
