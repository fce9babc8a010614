# Kafka Journal. `make run` and `make test` are all a newcomer needs; the rest is below them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

# constraints.txt: the exact versions CI installs, inside pyproject.toml's ranges
PIP    := $(BIN)/pip install --quiet -c constraints.txt

.PHONY: run test install install-worker browser lint typecheck unit integration bench stack-up stack-down clean

run: install-worker  ## real Kafka + Cassandra started locally, a worker serving the HTTP API
	$(BIN)/kafka-journal run

test: install browser lint typecheck  ## ruff, mypy, pytest (starts the stack); KJ_SECURITY=on: unit + secured tests
	$(BIN)/pytest

install: $(VENV)/.installed  ## every extra the tests, lint, typecheck and bench need

install-worker: $(VENV)/.installed-worker  ## only what running a worker needs

# tests/ui drive Debian's Chromium through Playwright (no browser download: `playwright install`
# is never run); installed here when missing and apt-get is there
browser:  ## the Chromium the console's browser tests use
	@test -x /usr/bin/chromium || ! command -v apt-get >/dev/null || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

$(BIN)/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-worker: pyproject.toml constraints.txt | $(BIN)/pip
	$(PIP) -e '.[worker]'
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/pip
	$(PIP) -e '.[worker,dev,spark,bench,eventsourcing]'
	touch $@ $(VENV)/.installed-worker

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

unit: install  ## the tests that need no server
	$(BIN)/pytest -m 'not integration'

integration: install browser
	$(BIN)/pytest -m integration

bench: install  ## the benchmarks against raw baselines; rewrites BENCHMARKS.md
	$(BIN)/kafka-journal bench

stack-up: install-worker
	$(BIN)/kafka-journal stack up

stack-down: install-worker
	$(BIN)/kafka-journal stack down

clean: stack-down
	rm -rf .stack $(VENV)
