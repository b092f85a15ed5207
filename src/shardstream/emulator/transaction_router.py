"""Emulator: mongos's side of a transaction, its participants and the two-phase commit.

mongos remembers each session's participants: a shard's first statement of the transaction
carries ``startTransaction``, later ones do not (:meth:`TransactionRouter.begin` takes the
client's ``startTransaction``, which opens a new participant list, and
:meth:`TransactionRouter.join` adds it where a shard joins). ``commitTransaction`` commits on
the one shard that wrote (plainly: one ``applyOps``), or, when several did, in two phases,
as the transaction coordinator does: every writing participant logs its operations
prepared, the coordinator takes the newest of their next ``ts`` as the commit time, and
each logs ``commitTransaction`` at exactly that time (so the transaction's events share one
``clusterTime`` on every shard), all under the participants' locks in the shards' order.
``abortTransaction`` reaches every participant.

See also src/mongo/s/transaction_router.cpp and src/mongo/db/s/transaction_coordinator.cpp.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import bson
from bson.timestamp import Timestamp

from shardstream.emulator.faults import CommandError
from shardstream.emulator.mongos_routing import gossip
from shardstream.emulator.replica_set import EmulatedReplicaSet

Body = dict[str, Any]


def _session(body: Body) -> tuple[bytes, int]:
    lsid, number = body.get("lsid"), body.get("txnNumber")
    if not isinstance(lsid, dict) or not isinstance(number, int):
        raise CommandError(72, "InvalidOptions", "a transaction needs both 'lsid' and 'txnNumber'")
    return bson.encode(lsid), int(number)


class TransactionRouter:
    """Each open transaction's participants, and its commit or abort on them."""

    def __init__(
        self,
        shards: Callable[[], Sequence[EmulatedReplicaSet]],
        cluster_time: Callable[[], Timestamp],
    ) -> None:
        """Args: the current shards (the first is the primary) and the mongos's time."""
        self._shards = shards
        self._cluster_time = cluster_time
        self._participants: dict[tuple[bytes, int], list[str]] = {}

    def begin(self, body: Body) -> Body:
        """``body`` without ``startTransaction``, which starts a new participant list: each
        shard's first statement gets it instead (:meth:`join`)."""
        if body.get("autocommit") is not False or not body.get("startTransaction"):
            return body
        self._participants[_session(body)] = []
        return {k: v for k, v in body.items() if k != "startTransaction"}

    def join(self, shard: EmulatedReplicaSet, body: Body) -> Body:
        """``body`` as ``shard`` must see it: with ``startTransaction`` if it is the
        shard's first statement of the client's transaction."""
        if body.get("autocommit") is not False:
            return body
        joined = self._participants.setdefault(_session(body), [])
        if shard.name in joined:
            return body
        joined.append(shard.name)
        return {**body, "startTransaction": True}

    def _joined(self, body: Body) -> tuple[list[EmulatedReplicaSet], EmulatedReplicaSet]:
        """The transaction's participants (forgotten here), in the shards' order; and
        the primary shard."""
        shards = list(self._shards())
        if not shards:
            raise CommandError(70, "ShardNotFound", "the cluster has no shards")
        names = self._participants.pop(_session(body), [])
        return [shard for shard in shards if shard.name in names], shards[0]

    def _plain(self, shard: EmulatedReplicaSet, body: Body) -> Body:
        return shard.run_command(gossip(body, self._cluster_time()))

    def commit(self, body: Body) -> Body:
        """Answer ``commitTransaction``: on the one writing shard, or in two phases."""
        joined, primary = self._joined(body)
        if not joined:  # it only read: the primary answers (a retried commit too)
            return self._plain(primary, body)
        with contextlib.ExitStack() as locks:
            for shard in joined:  # in the shards' order, as a migration takes them
                locks.enter_context(shard.store.lock)
            writers = [shard for shard in joined if shard.transactions.has_writes(body)]
            if len(writers) > 1:
                prepared = {shard.name: shard.transactions.prepare(body) for shard in writers}
                commit_ts = max(shard.oplog_writer.next_ts() for shard in writers)
                for shard in writers:
                    at = prepared[shard.name]
                    assert at is not None  # a writer prepared its operations
                    shard.transactions.commit_prepared(body, at, commit_ts)
            for shard in joined:
                if len(writers) <= 1 or shard not in writers:
                    self._plain(shard, body)
        return {"ok": 1.0}

    def abort(self, body: Body) -> Body:
        """Answer ``abortTransaction`` on every participant."""
        joined, primary = self._joined(body)
        for shard in joined or [primary]:
            self._plain(shard, body)
        return {"ok": 1.0}
