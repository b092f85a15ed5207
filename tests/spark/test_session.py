"""The shared session works, and the ingest's session helper never stops a caller's."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from shardstream.spark.ingest.session import spark_session
from shardstream.spark.source.rows import EVENT_SCHEMA, SPARK_DDL

pytestmark = pytest.mark.spark


def test_spark_reads_the_ddl_schema(spark: Any) -> None:
    frame = spark.createDataFrame([], SPARK_DDL)
    assert frame.columns == EVENT_SCHEMA.names


def test_a_command_on_another_thread_uses_the_callers_session_and_leaves_it_up(
    spark: Any,
) -> None:
    # pyspark's "active" session is per thread: the command's thread has none of its own.
    used: list[Any] = []

    def command() -> None:
        with spark_session("local[1]") as session:
            used.append(session)

    runner = threading.Thread(target=command)
    runner.start()
    runner.join(120)
    assert [session.sparkContext for session in used] == [spark.sparkContext]
    assert spark.range(3).count() == 3  # still running


def test_driver_memory_sizes_the_heap_of_the_jvm_it_starts() -> None:
    # A JVM of its own (the suite's session is up in this process): its heap is the
    # setting's, not Spark's 1g default.
    script = (
        "from shardstream.spark.ingest.session import build_session\n"
        "spark = build_session('local[1]', driver_memory='1600m')\n"
        "print(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())\n"
        "spark.stop()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    heap = int(done.stdout.split()[-1])
    assert heap > 1200 << 20  # -Xmx1600m less the survivor space; 1g gives ~1000 MiB
