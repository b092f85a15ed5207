# Two entry points for a newcomer: `make demo` and `make test`. Each builds .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_DEV := $(VENV)/.installed-dev
STAMP_BASE := $(VENV)/.installed-base
STAMP_SPARK := $(VENV)/.installed-spark

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_BASE): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# The demo runs Spark and delta-rs: the spark extra (pyspark is a ~450 MB download).
$(STAMP_SPARK): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[spark]'
	touch $@ $(STAMP_BASE)

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_BASE) $(STAMP_SPARK)

demo: $(STAMP_SPARK)
	$(BIN)/shardstream demo

test: lint typecheck unit

lint: $(STAMP_DEV)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

unit: $(STAMP_DEV)
	$(BIN)/pytest -q

bench: $(STAMP_DEV)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/pytest -q benchmarks

clean:
	rm -rf $(VENV) build src/*.egg-info
