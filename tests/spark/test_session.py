"""The shared session works: Arrow round trip of the row schema through Spark."""

from __future__ import annotations

from typing import Any

import pytest

from shardstream.spark.source.rows import EVENT_SCHEMA, SPARK_DDL

pytestmark = pytest.mark.spark


def test_spark_reads_the_ddl_schema(spark: Any) -> None:
    frame = spark.createDataFrame([], SPARK_DDL)
    assert frame.columns == EVENT_SCHEMA.names
