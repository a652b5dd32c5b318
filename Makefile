# Quick start: `make demo` plays the reference room on the local stack; `make test` runs every test.
# `make check` (format, lint, types, import contracts) and `make unit` (the fast tier) beside them.
# Both create the virtualenv and install what they need (Python 3.11+, Node 20 with npm).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Every runtime dependency, transitive included, pinned for every platform (`make lock`): the
# virtualenv installs it, and the Lambda layer is built from it (infra/quayinfra/build_layer.py).
LOCK := requirements/runtime.lock
NODE_STAMP := node_modules/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export AWS_ACCOUNT_ID_ENDPOINT_MODE := disabled

.PHONY: demo test unit check format install synth bench clean lock fuzz chaos preflight

# The lock first (exact versions), then the project and its dev tools constrained by it, so no
# dev tool moves a runtime package off its locked version.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r $(LOCK)
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[dev]'
	touch $(STAMP)

# Re-resolve the runtime lock after changing [project].dependencies (keeps the locked versions
# that still fit; `make lock UPGRADE=--upgrade` moves everything to the newest).
lock: $(STAMP)
	$(BIN)/python -m uv --version >/dev/null 2>&1 || $(BIN)/pip install --quiet uv
	$(BIN)/python -m uv pip compile pyproject.toml --universal --python-version 3.11 \
		--custom-compile-command "make lock" $(UPGRADE) -o $(LOCK)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

install: $(STAMP) $(NODE_STAMP)

demo: $(STAMP)
	$(BIN)/quay demo

# The whole suite: every AWS call is checked against its role in the synthesized template, and
# QUAY_IAM_FULL=1 also fails on a grant no call used unless it has a reason (tests/conftest.py).
test: $(STAMP) $(NODE_STAMP)
	QUAY_IAM_FULL=1 $(BIN)/pytest -q -n 2 --dist loadfile

# The fast tier: tests marked `unit` (no AWS, not even moto, and no network: tests/conftest.py
# refuses both), in one process, in about 15 s.
unit: $(STAMP)
	$(BIN)/pytest -q -m unit -p no:xdist

# Style and contracts, 0 findings: ruff's formatter and linter, mypy with the pydantic plugin,
# import-linter's contracts (pyproject.toml configures all four; pre-commit runs the same).
check: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	PYTHONPATH=functions:infra $(BIN)/lint-imports

# Apply the formatter and the linter's safe fixes.
format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# BENCH_INGEST_MIB: the size of the four text files whose ingest peaks the big-room section
# measures (25 MiB: the room cap; several minutes); 0 leaves that measurement out.
BENCH_INGEST_MIB ?= 25
bench: $(STAMP)
	$(BIN)/python scripts/bench.py --big-room-ingest $(BENCH_INGEST_MIB)

chaos: $(STAMP)
	$(BIN)/quay chaos

# Property-based fuzzing from the served OpenAPI document (schemathesis, tests/api/apifuzz.py):
# >= 1,000 generated cases through the handler and 300 through quay dev's real HTTP path, fresh
# ones each run; fails on any 5xx, undeclared status or body off its schema; prints the status mix
# per route. `make test` runs a seeded subset of the same tests.
fuzz: $(STAMP)
	QUAY_FUZZ_CASES=1100 QUAY_FUZZ_HTTP_CASES=300 QUAY_FUZZ_RANDOM=1 \
		$(BIN)/pytest -q -s -n 0 -p no:cacheprovider tests/api/test_api_fuzz.py -k schemathesis

# Through the CDK CLI, so cdk.json's context and feature flags apply (the tests synthesize the
# same way: tests/infra/conftest.py). Extra context: make synth CONTEXT="-c stage=prod".
synth: $(STAMP) $(NODE_STAMP)
	npx --no-install cdk synth --quiet $(CONTEXT)

# What a `cdk deploy` would hit on the account your AWS configuration names (docs/deploy.md):
# the Lambda concurrency quota, the bootstrap version, API Gateway's account role, Bedrock access.
preflight: synth
	$(BIN)/quay preflight $(PREFLIGHT)

clean:
	rm -rf $(VENV) node_modules cdk.out .build .pytest_cache
