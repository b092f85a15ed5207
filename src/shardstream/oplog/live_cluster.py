"""Layer 1: open a live sharded cluster as one :class:`LiveOplogSource` per shard.

From a mongos URI (or a connected ``MongoClient``): discover the shards, pick the
start point as mongos would when none is given (its current cluster time plus one
tick, the same point on every shard), and start a tailer per shard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.oplog.cluster_discovery import discover_cluster
from shardstream.oplog.live_lookup import LiveDocumentLookup
from shardstream.oplog.live_source import LiveOplogSource
from shardstream.oplog.source import OplogSource


def open_live_cluster(
    cluster: str | MongoClient[Any],
    *,
    start: Timestamp | None = None,
    await_ms: int = 1000,
    read_preference: str = "primary",
    client_options: Mapping[str, Any] | None = None,
    with_lookup: bool = False,
) -> tuple[dict[str, OplogSource], Timestamp, LiveDocumentLookup | None]:
    """Return a tailer per shard, the time they start at, and (if asked) a document lookup.

    Args:
        cluster: a mongos URI, or a MongoClient connected to mongos.
        start: where every shard starts; default: the cluster's time + 1 tick.
        await_ms: how long each tailer's getMore waits for new entries.
        read_preference: which member each tailer reads (secondaries offload primaries).
        client_options: extra MongoClient options for the shard connections.
        with_lookup: also build the lookup the image options (``fullDocument``,
            ``fullDocumentBeforeChange``) need.

    Raises:
        OplogError: the cluster cannot be reached or listed (the URI is redacted).
    """
    info = discover_cluster(cluster, client_options=dict(client_options or {}))
    if start is None:
        now = info.cluster_time
        start = Timestamp(now.time, now.inc + 1)
    sources: dict[str, OplogSource] = {}
    try:
        for shard in info.shards:
            sources[shard.name] = LiveOplogSource(
                shard.name,
                shard.uri,
                start=start,
                await_ms=await_ms,
                read_preference=read_preference,
                client_options=client_options,
            )
    except BaseException:
        for source in sources.values():
            source.close()
        raise
    lookup = None
    if with_lookup:
        owns = isinstance(cluster, str)
        if isinstance(cluster, str):
            mongos: MongoClient[Any] = MongoClient(cluster, **dict(client_options or {}))
        else:
            mongos = cluster
        uris = {shard.name: shard.uri for shard in info.shards}
        lookup = LiveDocumentLookup(mongos, uris, client_options, owns_mongos=owns)
    return sources, start, lookup
