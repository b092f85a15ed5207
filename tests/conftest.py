"""Shared test configuration: per-test deadlines, a deterministic Hypothesis profile, the paths."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.paths import PATHS, OnPath


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run without pytest-timeout: every test must fail, not hang, on a bug."""
    if not config.pluginmanager.hasplugin("timeout"):
        raise pytest.UsageError(
            "pytest-timeout is not installed (the dev extra pins it: `make test`, or "
            "`.venv/bin/python -m pip install -c constraints.txt pytest-timeout`)"
        )
    # Every JVM the tests start (the shared sessions, each `shardstream ingest` run, the
    # docs' examples) compiles with C1 alone: a test's JVM lives seconds, and C2's
    # compiling of Spark's start-up paths was a third of such a run's CPU (a 300-entry
    # simulated ingest: 57-59 CPU-seconds over every process, 37-42 with C1 alone), on
    # two cores the suite's JVMs share. spark-submit reads SPARK_SUBMIT_OPTS; a value of
    # the caller's own is kept. Product runs and benchmarks keep the JVM's default.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


settings.register_profile(
    "shardstream",
    deadline=None,  # CI machines share cores; timing belongs in benchmarks/, not here
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples on every run, so CI failures reproduce
)
settings.load_profile("shardstream")


@pytest.fixture(params=PATHS, ids=[path.name for path in PATHS])
def path(request: pytest.FixtureRequest) -> OnPath:
    """The reference path, then the fast path (tests/paths.py): a test taking it runs on both."""
    on_path: OnPath = request.param
    return on_path
