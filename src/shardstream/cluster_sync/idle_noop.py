"""Sync: nudge idle source shards so one quiet shard does not hold the whole stream back.

The merge releases an event only when every shard has promised not to write anything
earlier; an idle shard promises more only when its periodic no-op writer runs
(``periodicNoopIntervalSecs``, 10 s by default), so its silence delays every other
shard's events by up to that interval.  With ``--idle-noop-interval S`` the sync does
what that writer does, sooner: a shard whose position has not moved for S seconds gets
an ``appendOplogNote`` (a no-op in its oplog), which moves its promise to the present.

``appendOplogNote`` needs the ``appendOplogNote`` action on the cluster resource, which
the built-in ``clusterManager`` role (and ``root``) grants; without it the first nudge
fails with the server's Unauthorized error, naming the shard.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.errors import OplogError
from shardstream.oplog.live.discovery import discover_cluster
from shardstream.oplog.redaction import redact_text


class IdleShardNudger:
    """Writes a no-op to each source shard whose position stood still for ``interval_s``."""

    def __init__(self, source_uri: str, interval_s: float) -> None:
        """Args: the source mongos URI (its credentials reach the shards) and S."""
        if interval_s <= 0:
            raise ValueError(f"expected an idle no-op interval > 0 s, got {interval_s}")
        self._interval_s = interval_s
        self._uris = {shard.name: shard.uri for shard in discover_cluster(source_uri).shards}
        self._clients: dict[str, MongoClient[Any]] = {}
        self._seen: dict[str, tuple[Timestamp | None, float]] = {}
        self.nudges = 0

    def check(self, positions: Mapping[str, Timestamp | None]) -> list[str]:
        """Nudge every shard whose position did not move for the interval; return them."""
        now = time.monotonic()
        nudged: list[str] = []
        for name, position in positions.items():
            previous = self._seen.get(name)
            if previous is None or previous[0] != position:
                self._seen[name] = (position, now)
            elif now - previous[1] >= self._interval_s and name in self._uris:
                self._nudge(name)
                self._seen[name] = (position, now)
                nudged.append(name)
        return nudged

    def _nudge(self, name: str) -> None:
        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = MongoClient(self._uris[name])
        try:
            client.admin.command(
                {"appendOplogNote": 1, "data": {"msg": "shardstream sync idle shard no-op"}}
            )
        except PyMongoError as exc:
            raise OplogError(
                f"expected shard {name!r} to take appendOplogNote (the clusterManager role "
                f"grants it) for --idle-noop-interval, got {redact_text(str(exc))}"
            ) from None
        self.nudges += 1

    def close(self) -> None:
        """Close the shard connections."""
        for client in self._clients.values():
            client.close()
