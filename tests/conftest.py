"""Shared test configuration: per-test deadlines, a deterministic Hypothesis profile, the paths."""

from __future__ import annotations

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
