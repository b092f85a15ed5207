"""N shards' change streams merged into the one stream mongos would emit.

Pure except for what the oplog sources do.  See docs/design.md for the merge rules.
"""

from __future__ import annotations

from shardstream.merger.async_results_merger import AsyncResultsMerger
from shardstream.merger.merged_stream import MergedStream
from shardstream.merger.topology import (
    ShardChange,
    ShardChangeKind,
    StaticTopology,
    TopologyBatch,
    TopologySource,
)

__all__ = [
    "AsyncResultsMerger",
    "MergedStream",
    "ShardChange",
    "ShardChangeKind",
    "StaticTopology",
    "TopologyBatch",
    "TopologySource",
]
