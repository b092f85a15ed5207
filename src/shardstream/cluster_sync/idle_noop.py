"""Sync: nudge idle source shards so one quiet shard does not hold the whole stream back.

The merge releases an event only when every shard has promised not to write anything
earlier; an idle shard promises more only when its periodic no-op writer runs
(``periodicNoopIntervalSecs``, 10 s by default), so its silence delays every other
shard's events by up to that interval.  With ``--idle-noop-interval S`` the sync does
what that writer does, sooner: a shard whose position has not moved for S seconds gets
an ``appendOplogNote`` (a no-op in its oplog), which moves its promise to the present.
:meth:`IdleShardNudger.check` runs on the batch reader's thread each time the stream has
nothing ready (every ``STEP_S``, 10 ms, while the merge holds events back), so the nudge
goes out S seconds after the shard was last seen to move, not at the next batch's end: at
most one no-op per shard every S, and an event waits for the next one up to S.

"The present" must mean the busy shards' present.  A no-op takes its ``ts`` from the idle
node's own clock, ``(wall second, 1)`` when nothing newer reached it, which is behind the
events a busy shard logged earlier in the same second: those would wait for the next
nudge.  So the nudge carries the newest shard's ``$clusterTime`` (read from a ``ping``
to that shard, signed by the cluster's keys, so any member accepts it): the idle node
advances its clock past it, as when mongos gossips, and its no-op promises everything
the busy shards have logged.  (``appendOplogNote``'s own ``maxClusterTime`` only decides
whether to write, not at what time.)

``appendOplogNote`` needs the ``appendOplogNote`` action on the cluster resource, which
the built-in ``clusterManager`` role (and ``root``) grants; without it the first nudge
fails with the server's Unauthorized error, naming the shard.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.errors import OplogError
from shardstream.oplog.live.discovery import discover_cluster
from shardstream.oplog.redaction import redact_text

NUDGE_MESSAGE: Final = "shardstream sync idle shard no-op"  # the no-op's o.msg


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
        known = {name: ts for name, ts in positions.items() if ts is not None}
        newest = max(known, key=known.__getitem__, default=None)
        for name, position in positions.items():
            previous = self._seen.get(name)
            if previous is None or previous[0] != position:
                self._seen[name] = (position, now)
            elif now - previous[1] >= self._interval_s and name in self._uris:
                self._nudge(name, newest if newest != name else None)
                self._seen[name] = (position, now)
                nudged.append(name)
        return nudged

    def _client(self, name: str) -> MongoClient[Any]:
        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = MongoClient(self._uris[name])
        return client

    def _nudge(self, name: str, newest: str | None) -> None:
        try:
            cluster_time = None
            if newest is not None and newest in self._uris:
                cluster_time = self._cluster_time_of(newest)
            client = self._client(name)
            with client.start_session(causal_consistency=False) as session:
                if cluster_time is not None:
                    session.advance_cluster_time(cluster_time)
                client.admin.command(
                    {"appendOplogNote": 1, "data": {"msg": NUDGE_MESSAGE}},
                    session=session,
                )
        except PyMongoError as exc:
            raise OplogError(
                f"expected shard {name!r} to take appendOplogNote (the clusterManager role "
                f"grants it) for --idle-noop-interval, got {redact_text(str(exc))}"
            ) from None
        self.nudges += 1

    def _cluster_time_of(self, name: str) -> Mapping[str, Any] | None:
        """The signed ``$clusterTime`` shard ``name`` answers with (at or past its newest ts)."""
        client = self._client(name)
        with client.start_session(causal_consistency=False) as session:
            client.admin.command("ping", session=session)
            return session.cluster_time

    def close(self) -> None:
        """Close the shard connections."""
        for client in self._clients.values():
            client.close()
