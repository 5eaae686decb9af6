# Sourcebook set-up. `make run` and `make test` each install whatever is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
# llama-cpp-python builds from source, once per .venv, and `run`, `test` and `bench` all use that
# one build. llama.cpp's default (GGML_NATIVE=ON) compiles for every instruction the build
# machine's cpuid reports, and a CPU may report instructions its OS or VM does not grant (Intel
# AMX traps in some VMs): that build dies with SIGILL there, and on any laptop unlike the build
# machine. So on x86-64 the build ships llama.cpp's CPU variants (x64 and SSE4.2 up to AVX2,
# AVX-512 and AMX) and links none in; at a model's first use Sourcebook tries them in a child
# process, best first, and loads the first that survives (models/probe.py), since ggml's own
# choice goes by cpuid alone and picks the AMX one where AMX traps. AVX-512 reads prompts about
# 1.5x as fast as AVX2 on the 2-core VMs (bench/results/llm_builds.json). The variants install
# into llama_cpp/lib. LLaVA is not needed (saves a fifth of the build). LLAMA_CMAKE_ARGS
# overrides (e.g. the one explicit feature set
# "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON", a build 4x
# faster to compile that reads prompts at the AVX2 speed everywhere).
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON \
	-DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib
else
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF
endif
# The pin lives in pyproject.toml; read it there so the two cannot disagree.
LLAMA_REQUIREMENT := $(shell grep -o '"llama-cpp-python[^"]*"' pyproject.toml | tr -d '"')
# The build's stamp is named by the pin and the flags, so changing either builds again.
LLAMA_STAMP := $(VENV)/.llama-$(shell printf '%s' '$(LLAMA_REQUIREMENT) $(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)

SAMPLE_QUESTION ?= What are the strategic goals of the Department of Labor?

.PHONY: run test lint pytest bench clean-venv system-deps rebuild-llama package package-test

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Sourcebook needs Python 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# --no-cache-dir: pip's wheel cache is keyed by the source, not by CMAKE_ARGS, so a wheel built
# natively earlier would otherwise be reused as it is.
$(LLAMA_STAMP): | $(BIN)/python
	rm -f $(VENV)/.llama-*
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --no-cache-dir --force-reinstall \
		--no-deps '$(LLAMA_REQUIREMENT)'
	@echo '$(LLAMA_REQUIREMENT) $(LLAMA_CMAKE_ARGS)' > $@

# Build llama-cpp-python again (a changed pin or LLAMA_CMAKE_ARGS does so by itself; this is for
# when `sourcebook models` reports that the local runtime crashed).
rebuild-llama: | $(BIN)/python
	rm -f $(VENV)/.llama-*
	$(MAKE) $(LLAMA_STAMP)

$(VENV)/.run-installed: pyproject.toml $(LLAMA_STAMP) | $(BIN)/python
	$(BIN)/pip install -e '.[starter]'
	@touch $@

$(VENV)/.test-installed: pyproject.toml $(LLAMA_STAMP) | $(BIN)/python
	$(BIN)/pip install -e '.[test,starter-fast]'
	@touch $@

$(VENV)/.package-installed: pyproject.toml $(LLAMA_STAMP) | $(BIN)/python
	$(BIN)/pip install -e '.[package]'
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

# The app as a one-folder PyInstaller bundle in a tarball, with the 1.5B starter's parts inside
# (assembled into the model cache on the app's first use, as `make run` does); see packaging/.
# PACKAGE_STARTER=starter-fast ships the 0.5B one, PACKAGE_STARTER=none no local model.
PACKAGE_STARTER ?= starter
package: system-deps $(VENV)/.run-installed $(VENV)/.package-installed
	bash packaging/build-linux.sh --starter $(PACKAGE_STARTER)

# A bundle without a local model, tested as a user would use it (packaging/test-bundle.sh): in
# an empty folder, a fresh HOME, no .venv on the path, on Xvfb; the llama.cpp probe runs through
# the bundle's binary on the test model (the 0.5B starter, assembled from its parts if needed).
package-test: system-deps $(VENV)/.test-installed $(VENV)/.package-installed
	bash packaging/build-linux.sh --starter none
	gguf=$$($(BIN)/python -c 'from core.settings import models_cache_dir; from models.starter \
		import STARTER_FAST, ensure_starter; print(ensure_starter(STARTER_FAST, models_cache_dir()))') \
		&& bash packaging/test-bundle.sh "$$(ls -t dist/sourcebook-*-none.tar.gz | head -1)" \
		--gguf "$$gguf"

clean-venv:
	rm -rf $(VENV)
