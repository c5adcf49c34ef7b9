# Two entry points for a fresh machine: `make demo` and `make test`. Both create ./.venv and install into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DIR ?= .anaphora-demo
# The browser tests' Chromium: install-test installs Debian's package when it is missing and this user can
# (INSTALL_CHROMIUM=0 leaves the machine as it is; without a browser the browser tests are skipped, with the reason).
ANAPHORA_TEST_CHROMIUM ?= /usr/bin/chromium
export ANAPHORA_TEST_CHROMIUM
INSTALL_CHROMIUM ?= 1
PYTEST_ARGS ?=  # e.g. make test PYTEST_ARGS=tests/browser

.PHONY: install install-test demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned to the CPU build (a plain `torch` requirement would pull a multi-GB CUDA build)
install: $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[embedded]'

install-test: install
	$(BIN)/pip install --quiet -e '.[embedded,test]'
ifeq ($(INSTALL_CHROMIUM),1)
	sh scripts/install_chromium.sh $(ANAPHORA_TEST_CHROMIUM)
endif

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/anaphora --data-dir $(DEMO_DIR) demo --docs examples/docs --script examples/demo_conversation.json

test: install-test
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

lint:
	$(BIN)/ruff check src tests bench

bench: install-test
	HF_HUB_OFFLINE=1 $(BIN)/python bench/retrieval_latency.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
