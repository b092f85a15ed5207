"""The lakehouse sinks: a Delta change log and a document mirror, written through delta-rs.

One package per table kind: ``changelog`` (the change log), ``mirror`` (the one-table
mirror, the per-collection layout's document state, and its ``bucketed`` layout), ``typed``
(each collection's typed mirror and SCD2 history) and ``snapshot`` (``--snapshot`` into
them).  ``sink`` (``LakehouseSink``) commits one micro-batch to the tables exactly once;
``commits`` holds the markers every table's commit carries, ``maintenance`` the compaction.
Each package's README.md says what its modules do.
"""

from __future__ import annotations

from shardstream.spark.delta.changelog.table import DeltaChangelog
from shardstream.spark.delta.mirror.table import DeltaMirror
from shardstream.spark.delta.sink import LakehouseSink

__all__ = ["DeltaChangelog", "DeltaMirror", "LakehouseSink"]
