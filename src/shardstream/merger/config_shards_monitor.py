"""Input: the live ``config.shards`` monitor, a remote of the merge like any shard.

mongos learns of shards joining or leaving from a change stream on ``config.shards``,
opened on the config server at the stream's start.  This is the same thing built from
shardstream's own parts: the config server's oplog (a live tailer) through a shard
pipeline scoped to ``config.shards``, so transactions, majority reads and the
promise rules are the ones every shard gets.  An insert is a shard added (its
``host`` says where to read it, from the add time on), a delete a shard removed;
updates (draining flags, new member lists) change nothing a stream reads.

Its promise gates the merge: no event is released past the config server's majority
point, so a shard added at time T is always known before any event after T leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bson.timestamp import Timestamp

from shardstream.errors import MergeError
from shardstream.merger.shard_reader import ShardReader
from shardstream.merger.topology import ShardChange, ShardChangeKind, TopologyBatch
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import decode_token
from shardstream.transform import ChangeEvent, ChangeStreamOptions

# (shard name, its config.shards host string, the time to read it from) -> its oplog.
ShardOpener = Callable[[str, str, Timestamp], OplogSource]
_READ_BATCH = 100


class ConfigShardsMonitor:
    """A :class:`~shardstream.merger.topology.TopologySource` over the config server's oplog.

    Args:
        config_source: the config server's oplog, from the stream's start.
        start: the stream's start time (the monitor's oplog must reach back to it).
        open_shard: opens an added shard's oplog.
    """

    def __init__(self, config_source: OplogSource, start: Timestamp, open_shard: ShardOpener):
        options = ChangeStreamOptions(db="config", coll="shards", start_at_operation_time=start)
        self._reader = ShardReader(config_source, options, start=start)
        self._open_shard = open_shard

    @property
    def source(self) -> OplogSource:
        """The config server's oplog."""
        return self._reader.source

    def next_batch(self) -> TopologyBatch | None:
        """The shard changes of the next config-server batch, and its promise.

        Raises:
            MergeError: a ``config.shards`` write without the fields a shard change needs.
        """
        batch = self._reader.read(_READ_BATCH)
        if batch is None:
            return None
        changes = [c for c in (self._change(e) for e in batch.events) if c is not None]
        promise = None if batch.promise is None else decode_token(batch.promise).cluster_time
        return TopologyBatch(changes, promise, exhausted=batch.exhausted)

    def close(self) -> None:
        """Stop reading the config server."""
        self._reader.source.close()

    def _change(self, event: ChangeEvent) -> ShardChange | None:
        document = event.document
        kind = event.operation_type
        ts = document.get("clusterTime")
        if kind not in ("insert", "delete"):
            return None  # an update or replace renames nothing and adds no shard
        name = _field(document.get("documentKey"), "_id")
        if not isinstance(ts, Timestamp) or not isinstance(name, str):
            raise MergeError(
                f"expected a config.shards {kind} with a string _id and a clusterTime, "
                f"got {document!r:.200}"
            )
        if kind == "delete":
            return ShardChange(ts, ShardChangeKind.REMOVED, name)
        host = _field(document.get("fullDocument"), "host")
        if not isinstance(host, str):
            raise MergeError(f"expected shard {name!r}'s document to hold a host, got {host!r}")
        opener = self._open_shard
        # A new shard holds nothing the stream needs before it joined: read from the add.
        return ShardChange(ts, ShardChangeKind.ADDED, name, lambda: opener(name, host, ts))


def _field(document: object, name: str) -> Any:
    return document.get(name) if isinstance(document, Mapping) else None
