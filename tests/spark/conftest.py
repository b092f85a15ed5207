"""One local[2] SparkSession for the whole suite (starting one costs ~10 s).

Spark tests take the ``spark`` fixture and carry the ``spark`` marker; each uses
its own ``tmp_path`` checkpoint and stops every query it starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pyspark_sql = pytest.importorskip("pyspark.sql")
    config_dir: Path = tmp_path_factory.mktemp("spark-conf")
    log4j = config_dir / "log4j2.properties"
    log4j.write_text(_LOG4J)
    # Naive datetimes from read() are read in the worker's local zone: pin UTC everywhere.
    os.environ.setdefault("TZ", "UTC")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("shardstream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _python_workers_use_this_interpreter() -> None:
    """Spark starts Python workers with PYSPARK_PYTHON, else ``python3`` from PATH, which
    need not have pyarrow or shardstream: point it at this venv before the session starts
    (autouse session fixtures run before the ``spark`` fixture)."""
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
