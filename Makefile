# Two entry points for a newcomer: `make demo` and `make test`. Each builds .venv on first use,
# installing exactly the versions pinned in constraints.txt (`make lock` refreshes them).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := constraints.txt
# -c pins every package installed; --build-constraint pins the isolated build's setuptools.
PIP_INSTALL := $(BIN)/python -m pip install --quiet -c $(LOCK) --build-constraint $(LOCK)
STAMP_VENV := $(VENV)/.pinned-pip
STAMP_DEV := $(VENV)/.installed-dev
STAMP_BASE := $(VENV)/.installed-base
STAMP_SPARK := $(VENV)/.installed-spark
# Compiled modules are cached out of the tree, under .venv/: where the environment sets
# PYTHONDONTWRITEBYTECODE (this machine's does), every Python process the suite or the demo
# starts (CLI runs, emulated clusters, Spark's Python workers) compiled shardstream's
# modules again, ~0.15-0.25 s of CPU each.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
# An editable install builds the C modules in place: a change to one needs a reinstall.
BUILD_INPUTS := pyproject.toml setup.py $(LOCK) $(wildcard src/shardstream/transform/raw/_*.[ch] src/shardstream/transform/update/_*.[ch] src/shardstream/resume_token/_*.[ch] src/shardstream/oplog/_*.c src/shardstream/cluster_sync/_*.[ch] src/shardstream/spark/delta/typed/_*.[ch])

.PHONY: demo test lint typecheck unit bench fuzz lock lockcheck clean

# The venv's own pip first, at the pinned version (older pips lack --build-constraint).
$(STAMP_VENV): $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(LOCK) pip
	touch $@

$(STAMP_BASE): $(BUILD_INPUTS) | $(STAMP_VENV)
	$(PIP_INSTALL) -e .
	touch $@

# The demo runs Spark and delta-rs: the spark extra (pyspark is a ~450 MB download).
$(STAMP_SPARK): $(BUILD_INPUTS) | $(STAMP_VENV)
	$(PIP_INSTALL) -e '.[spark]'
	touch $@ $(STAMP_BASE)

$(STAMP_DEV): $(BUILD_INPUTS) | $(STAMP_VENV)
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(STAMP_BASE) $(STAMP_SPARK)

demo: $(STAMP_SPARK)
	$(BIN)/shardstream demo

test: lockcheck lint typecheck unit

# Fails when pyproject.toml's requirements changed without `make lock`.
lockcheck: $(STAMP_DEV)
	$(BIN)/python -m tests.dependency_lock check

lint: $(STAMP_DEV)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

# Three pytest processes (pytest-xdist) on 2 cores: much of the suite's wall time is
# waiting (JVM starts, subprocesses, sockets); on a fresh clone two took 15.8 min of
# pytest, three 12.5 (2026-11-28). `worksteal`: a worker left idle takes queued tests
# from a busy one, so the longest tests (JVM starts, 60-110 s) no longer end the run on
# one worker while the others wait: 792 -> 664 s, the cores busy 79 -> 96 % of the run
# (2026-11-29, JVMs on C1 in both: tests/conftest.py).
unit: $(STAMP_DEV)
	$(BIN)/pytest -q -n 3 --dist worksteal

bench: $(STAMP_DEV)
	$(BIN)/pytest -q benchmarks

# A longer fuzz campaign than the suite's (`make fuzz N=100000 SEED=1 JOBS=2`): counts on stdout.
N ?= 10000
SEED ?= 0
JOBS ?= 2
fuzz: $(STAMP_DEV)
	$(BIN)/python -m tests.fuzz.campaign $(N) $(SEED) $(JOBS)

# Resolve the newest versions pyproject.toml's ranges allow in a scratch venv, then pin them.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip setuptools
	.lock-venv/bin/python -m pip install --quiet -e '.[dev]'
	.lock-venv/bin/python -m tests.dependency_lock write .lock-venv
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .lock-venv build src/*.egg-info src/shardstream/transform/raw/*.so src/shardstream/transform/update/*.so src/shardstream/resume_token/*.so src/shardstream/spark/delta/typed/*.so
