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


# The suite's longest tests (the durations every run lists), longest first. Run first, they
# spread over the pytest-xdist workers instead of one of them starting a two-minute test
# when the others are nearly done: on 2 cores the suite's wall time is its last worker's.
_LONG_FIRST = (
    "tests/spark/test_kill_ingest.py",
    "tests/docs/test_examples.py",
    "tests/spark/test_ingest.py",
    "tests/spark/test_ingest_bucketed.py",
    "tests/spark/test_ingest_no_mirror.py",
    "tests/spark/test_collection_tables.py",
    "tests/fuzz/",
    "tests/spark/test_ingest_collections.py",
    "tests/cluster_sync/test_sync_kill.py",
    "tests/transform/raw/test_bson_check.py",
    "tests/transform/test_raw_extended_json.py",
    # Then the rest of Spark's (each starts or shares a JVM; left in collection order they
    # were the last minutes of a fresh clone's run, three JVMs at a time).
    "tests/spark/",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest tests first (a stable sort: otherwise the collection's order)."""

    def rank(item: pytest.Item) -> int:
        for position, prefix in enumerate(_LONG_FIRST):
            if item.nodeid.startswith(prefix):
                return position
        return len(_LONG_FIRST)

    items.sort(key=rank)
