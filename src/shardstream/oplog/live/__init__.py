"""Live shards: each shard's ``local.oplog.rs`` tailed in parallel, found through mongos.

``discovery`` lists the shards and the cluster time; ``cluster`` opens one tailer per shard
(``tailer``: a thread; ``process_tailer``: a child process) plus the config server's;
``majority`` and ``faults`` hold the safety checks and the retry rules; ``lookup`` reads the
documents the image options need. Importing this package imports pymongo.
"""

from __future__ import annotations

from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.live.cluster import LiveCluster, connect_live_cluster
from shardstream.oplog.live.discovery import ClusterInfo, discover_cluster
from shardstream.oplog.live.faults import RetryPolicy
from shardstream.oplog.live.process_tailer import ProcessOplogSource
from shardstream.oplog.live.tailer import LiveOplogSource

__all__ = [
    "RAW_OPLOG_CODEC_OPTIONS",
    "ClusterInfo",
    "LiveCluster",
    "LiveOplogSource",
    "ProcessOplogSource",
    "RetryPolicy",
    "connect_live_cluster",
    "discover_cluster",
]
