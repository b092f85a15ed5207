"""Spark ingestion of the merged stream (the only package that imports pyspark).

Needs the ``spark`` extra (pyspark, pyarrow, deltalake).  :mod:`shardstream.spark.source.rows`
is the row schema shared by the data source and the lakehouse sinks;
:mod:`shardstream.spark.source.data_source` is the ``shardstream`` streaming / batch source::

    import shardstream.spark
    shardstream.spark.register(spark)
    events = spark.readStream.format("shardstream").option("simulate", "true").load()
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``shardstream`` data source with ``spark`` (a SparkSession).

    pyspark is imported here, not at package import, so that :mod:`shardstream.spark.source.rows`
    stays usable with pyarrow alone.
    """
    from shardstream.spark.source.data_source import register as register_source

    register_source(spark)
