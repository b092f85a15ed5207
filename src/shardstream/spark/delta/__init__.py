"""The lakehouse sinks: a Delta change log and a document mirror, written through delta-rs.

``sink`` (``LakehouseSink``) commits one micro-batch to both tables exactly once;
``changelog`` and ``mirror`` are the tables, ``mirror_state`` the per-batch apply logic,
``commits`` the metadata each commit carries, ``mirror_check`` the comparisons tests use.
"""

from __future__ import annotations

from shardstream.spark.delta.changelog import DeltaChangelog
from shardstream.spark.delta.mirror import DeltaMirror
from shardstream.spark.delta.sink import LakehouseSink

__all__ = ["DeltaChangelog", "DeltaMirror", "LakehouseSink"]
