# Kafka Journal. `make run` and `make test` are all a newcomer needs; the rest is below them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test install lint typecheck unit integration bench stack-up stack-down clean

run: install  ## real Kafka + Cassandra started locally, a worker serving the HTTP API
	$(BIN)/kafka-journal run

test: install lint typecheck  ## ruff, mypy, pytest (starts the stack); KJ_SECURITY=on: unit + secured tests
	$(BIN)/pytest

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,spark,bench,eventsourcing]'
	touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install  ## the tests that need no server
	$(BIN)/pytest -m 'not integration'

integration: install
	$(BIN)/pytest -m integration

bench: install  ## the benchmarks against raw baselines; rewrites BENCHMARKS.md (~10 min)
	$(BIN)/kafka-journal bench

stack-up: install
	$(BIN)/kafka-journal stack up

stack-down: install
	$(BIN)/kafka-journal stack down

clean: stack-down
	rm -rf .stack $(VENV)
