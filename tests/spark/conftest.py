"""One local[2] SparkSession for the whole suite (starting one costs ~10 s).

Spark tests take the ``spark`` fixture and carry the ``spark`` marker; each uses
its own ``tmp_path`` checkpoint and stops every query it starts.  The session is the
one ``shardstream ingest`` builds (quiet, UTC, workers on this interpreter), so the
tests run the product's own configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark.sql")
    from shardstream.spark.ingest.session import build_session

    session = build_session("local[2]", app_name="shardstream-tests")
    yield session
    session.stop()
