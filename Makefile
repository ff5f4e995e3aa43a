# `make test` and `make demo` build their own virtualenv (.venv) with a Python >= 3.12 found by
# .ci/find-python, install the project with its test extra, then run.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: all venv test demo bench docs clean interop

all: test

$(STAMP): pyproject.toml
	@set -e; if [ ! -x $(PY) ]; then py=$$(sh .ci/find-python); echo "using $$py"; $$py -m venv $(VENV); fi
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

venv: $(STAMP)

# The official conformance suite (npm) for tests/e2e/test_conformance.py; without npm those tests skip.
CONFORMANCE := tests/conformance/node_modules/.package-lock.json

$(CONFORMANCE): tests/conformance/package-lock.json
	@if command -v npm >/dev/null; then cd tests/conformance && npm ci --no-audit --no-fund; \
	else echo "npm not found: the conformance tests will be skipped"; fi

# Real peers nobody here wrote (npm, pinned in tests/peers) for tests/e2e/test_everything.py; without npm
# those tests skip.
PEERS := tests/peers/node_modules/.package-lock.json

$(PEERS): tests/peers/package-lock.json
	@if command -v npm >/dev/null; then cd tests/peers && npm ci --no-audit --no-fund; \
	else echo "npm not found: the tests against server-everything will be skipped"; fi

test: $(STAMP) $(CONFORMANCE) $(PEERS)
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/mrtr-inspect demo --out out/demo

bench: $(STAMP)
	$(PY) bench/run_all.py

docs: $(STAMP)
	$(PY) -m mrtr_inspect.docs

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis

# The interop matrix (docs/interop.md): the npm clients pinned in bench/interop, then bench/interop.py.
INTEROP := bench/interop/node_modules/.package-lock.json

$(INTEROP): bench/interop/package-lock.json
	@if command -v npm >/dev/null; then cd bench/interop && npm ci --no-audit --no-fund; \
	else echo "npm not found: the interop matrix will say its npm clients are not installed"; fi

interop: $(STAMP) $(INTEROP)
	$(PY) bench/interop.py
