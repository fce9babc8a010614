# Kafka Journal. `make run` and `make test` are all a newcomer needs; the rest is below them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

# constraints.txt: the exact versions CI installs, inside pyproject.toml's ranges
PIP    := $(BIN)/pip install --quiet -c constraints.txt

.PHONY: run test install install-worker lint typecheck unit integration bench stack-up stack-down clean

run: install-worker  ## real Kafka + Cassandra started locally, a worker serving the HTTP API
	$(BIN)/kafka-journal run

test: install lint typecheck  ## ruff, mypy, pytest (starts the stack); KJ_SECURITY=on: unit + secured tests
	$(BIN)/pytest

install: $(VENV)/.installed  ## every extra the tests, lint, typecheck and bench need

install-worker: $(VENV)/.installed-worker  ## only what running a worker needs

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

typecheck: install
	$(BIN)/mypy

unit: install  ## the tests that need no server
	$(BIN)/pytest -m 'not integration'

integration: install
	$(BIN)/pytest -m integration

bench: install  ## the benchmarks against raw baselines; rewrites BENCHMARKS.md
	$(BIN)/kafka-journal bench

stack-up: install-worker
	$(BIN)/kafka-journal stack up

stack-down: install-worker
	$(BIN)/kafka-journal stack down

clean: stack-down
	rm -rf .stack $(VENV)
