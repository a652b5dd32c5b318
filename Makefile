# Quick start: `make demo` plays the reference room on the local stack; `make test` runs every test.
# Both create the virtualenv and install what they need (Python 3.11+, Node 20+ with npm).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export AWS_ACCOUNT_ID_ENDPOINT_MODE := disabled

.PHONY: demo test install synth bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

install: $(STAMP) $(NODE_STAMP)

demo: $(STAMP)
	$(BIN)/quay demo

test: $(STAMP) $(NODE_STAMP)
	$(BIN)/pytest -q -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

chaos: $(STAMP)
	$(BIN)/quay chaos

synth: $(STAMP) $(NODE_STAMP)
	$(BIN)/python infra/app.py

clean:
	rm -rf $(VENV) node_modules cdk.out .build .pytest_cache
