"""Sync: the source's newest committed cluster time, read from every shard, never assumed.

The lag line and ``--idle-exit`` compare what is applied with what the source has
committed. What the merge has seen is no measure of that: an idle shard that promised
nothing holds every other shard's events back, and the merged stream then looks quiet
while writes pile up. So the source's time is read: each shard's majority point, which
a replica-set member reports in ``hello`` as ``lastWrite.majorityOpTime``
(src/mongo/db/repl/replication_info.cpp), and the newest of them is the
source's time: every write committed anywhere is at or before it. A replica-set source
reports its own.

Shards are listed again at every read (a shard added mid-sync counts from then on) and
each shard's client is kept between reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.errors import OplogError
from shardstream.oplog.live.discovery import discover_cluster
from shardstream.oplog.redaction import redact_text, redact_uri


class SourceClock:
    """Reads the source's shards' majority points (:meth:`read`); :meth:`close` after."""

    def __init__(self, source: MongoClient[Any], source_uri: str, *, timeout_s: float) -> None:
        """Args: the client on the source's mongos (left open), its URI (the shards'
        connections copy its credentials), and how long one shard may take to answer."""
        self._source = source
        self._uri = source_uri
        self._timeout_ms = max(1, int(timeout_s * 1000))
        self._clients: dict[str, MongoClient[Any]] = {}

    def read(self) -> dict[str, Timestamp]:
        """Each shard's majority point by shard name (the source's own: ``""``).

        Raises:
            OplogError: a shard did not answer, or answered without a majority point.
        """
        cluster = discover_cluster(self._source, uri=self._uri)
        if not cluster.shards:  # a replica set: it reports its own point
            return {"": _majority_point(self._source.admin.command("hello"), self._uri)}
        points = {}
        for shard in cluster.shards:
            client = self._clients.get(shard.uri)
            if client is None:
                client = MongoClient(shard.uri, serverSelectionTimeoutMS=self._timeout_ms)
                self._clients[shard.uri] = client
            try:
                reply = client.admin.command("hello")
            except PyMongoError as exc:
                raise OplogError(
                    f"cannot read shard {shard.name}'s majority point at "
                    f"{shard.redacted_uri}: {redact_text(str(exc)).splitlines()[0]:.200}"
                ) from None
            points[shard.name] = _majority_point(reply, shard.uri)
        return points

    def newest(self) -> Timestamp:
        """The source's time: the newest of its shards' majority points."""
        return max(self.read().values())

    def close(self) -> None:
        """Close the shards' clients."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def _majority_point(reply: Mapping[str, Any], uri: str) -> Timestamp:
    last_write = reply.get("lastWrite")
    majority = last_write.get("majorityOpTime") if isinstance(last_write, Mapping) else None
    ts = majority.get("ts") if isinstance(majority, Mapping) else None
    if not isinstance(ts, Timestamp):
        raise OplogError(
            f"expected {redact_uri(uri)}'s hello to carry lastWrite.majorityOpTime.ts (a "
            f"replica-set member's majority point), got lastWrite {last_write!r:.120}"
        )
    return ts
