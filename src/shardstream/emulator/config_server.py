"""Emulator: the config server replica set, whose oplog records ``config.shards`` changes.

mongos watches ``config.shards`` on the config server to learn of shards added or
removed mid-stream; shardstream tails this oplog for the same reason.  Adding a shard
writes an insert of its ``config.shards`` document, removing one a delete, each at a
cluster time after every shard's newest entry, majority-committed at once (the config
server writes with ``w: majority``).

A real config server that nobody writes to still moves its majority point: the periodic
no-op writer (``periodicNoopIntervalSecs``) logs a no-op whenever the gossiped cluster
time is ahead of its last entry.  Here that writer runs, with no delay, each time a
client asks the server for its state (``hello``), catching up with the newest
majority-committed time among the shards; so an idle config server never holds a
merge back longer than a real one would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.emulator.loading import load
from shardstream.emulator.node import Body
from shardstream.emulator.replica_set import EmulatedReplicaSet

CONFIG_SHARDS_NS: Final = "config.shards"
# The cluster's identity: one document, its clusterId generated when the cluster is made
# (ShardingCatalogManager::_initConfigVersion), read through mongos.
CONFIG_VERSION_NS: Final = "config.version"
# config.shards' collection UUID; fixed so emulated oplogs are reproducible.
CONFIG_SHARDS_UUID: Final = Binary(uuid.UUID("c0f16000-5a4d-4b00-8000-000000000001").bytes, 4)
# The first entry of the config oplog: it reaches back before any stream's start.
FIRST_TS: Final = Timestamp(1, 1)


def _entry(ts: Timestamp, op: str, o: Body, **extra: Any) -> Body:
    return {
        "op": op,
        "ns": CONFIG_SHARDS_NS,
        "ui": CONFIG_SHARDS_UUID,
        "o": o,
        **extra,
        "ts": ts,
        "t": Int64(1),
        "v": Int64(2),
        "wall": ts.as_datetime(),
    }


class EmulatedConfigServer(EmulatedReplicaSet):
    """The config server: a replica set whose oplog holds ``config.shards`` writes.

    Args:
        cluster_majority: the newest majority-committed time among the data shards
            (None while there is none), which the no-op writer catches up with.
        max_wire_version: reported in ``hello``.
    """

    def __init__(
        self,
        cluster_majority: Callable[[], Timestamp | None],
        *,
        name: str = "configRepl",
        max_wire_version: int = 21,
    ) -> None:
        """Create a stopped config server with one initial no-op entry."""
        super().__init__(name, max_wire_version=max_wire_version)
        self._cluster_majority = cluster_majority
        self.periodic_noops = True
        self.append({"ts": FIRST_TS, "op": "n", "ns": "", "o": {"msg": "initiating set"}})
        self.set_majority(FIRST_TS)
        self.cluster_id = ObjectId()
        load(self.store, CONFIG_VERSION_NS, [{"_id": 1, "clusterId": self.cluster_id}])

    def record_shard_added(self, ts: Timestamp, shard: Body) -> None:
        """Log the insert of ``shard`` (a config.shards document) at ``ts``, committed."""
        self.append(_entry(ts, "i", shard, o2={"_id": shard["_id"]}))
        self.set_majority(ts)

    def record_shard_removed(self, ts: Timestamp, name: str) -> None:
        """Log the delete of shard ``name``'s document at ``ts``, committed."""
        self.append(_entry(ts, "d", {"_id": name}))
        self.set_majority(ts)

    def role_fields(self) -> Body:
        """Run the no-op writer, then answer as a replica-set primary."""
        if self.periodic_noops:
            self._write_noop()
        return super().role_fields()

    def _write_noop(self) -> None:
        target = self._cluster_majority()
        with self.oplog.changed:  # one writer at a time: the ts check and append are atomic
            last = self.oplog.last_ts
            if target is None or (last is not None and target <= last):
                return
            self.append({"ts": target, "op": "n", "ns": "", "o": {"msg": "periodic noop"}})
            self.set_majority(target)
