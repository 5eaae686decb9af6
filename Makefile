# Sourcebook set-up. `make run` and `make test` each install whatever is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export LANCEDB_LOG := error
# llama-cpp-python builds from source; the LLaVA part is not needed (saves a fifth of the build).
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

SAMPLE_QUESTION ?= What are the strategic goals of the Department of Labor?

.PHONY: run test lint pytest bench clean-venv system-deps

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Sourcebook needs Python 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[starter]'
	@touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[test,starter-fast]'
	@touch $@

# Debian packages (Tesseract for OCR, Xvfb for screenshots), installed when missing and root.
system-deps:
	@bash packaging/system-deps.sh

# Adds the bundled samples, then opens the app (without a display: answers a search instead).
run: system-deps $(VENV)/.run-installed
	$(BIN)/sourcebook add resources/samples --collection samples
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
		$(BIN)/sourcebook; \
	else \
		echo "No display found: answering a search on the command line instead."; \
		$(BIN)/sourcebook search "$(SAMPLE_QUESTION)" -k 5; \
	fi

test: system-deps $(VENV)/.test-installed lint pytest

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

pytest: $(VENV)/.test-installed
	QT_QPA_PLATFORM=offscreen $(BIN)/pytest -q

bench: $(VENV)/.test-installed
	$(BIN)/python bench/ingest_speed.py
	$(BIN)/python bench/search_latency.py
	$(BIN)/python bench/retrieval_quality.py
	$(BIN)/python bench/retrieval_financebench.py
	$(BIN)/python bench/ocr_cer.py
	$(BIN)/python bench/llm_bench.py
	$(BIN)/python bench/llm_turns.py

clean-venv:
	rm -rf $(VENV)
