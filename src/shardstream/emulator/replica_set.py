"""Emulator: one shard as a single-node replica-set primary with an in-memory oplog.

Tests append oplog entries and move the majority commit point separately, so entries
above the commit point exist (and a ``readConcern: local`` tail sees them) without being
majority-committed. The commit point is reported where a real primary reports it:
``hello.lastWrite.majorityOpTime`` and ``replSetGetStatus.optimes.lastCommittedOpTime``.
Clients may also write (CRUD, DDL, transactions): each write is logged as mongod logs it
and majority-committed at once, as in a one-member set.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.emulator.catalog_commands import CatalogCommands
from shardstream.emulator.cursors import ServerCursor
from shardstream.emulator.ddl_commands import DdlCommands
from shardstream.emulator.index_commands import IndexCommands
from shardstream.emulator.node import Body, EmulatedNode
from shardstream.emulator.oplog import OplogCursor, OplogStore
from shardstream.emulator.transactions import TransactionTable
from shardstream.emulator.user_write_block import UserWriteBlock
from shardstream.emulator.write_commands import WriteCommands
from shardstream.emulator.write_oplog import OplogWriter
from shardstream.emulator.write_path import WritePath

OPLOG_NS = "local.oplog.rs"
_TERM = Int64(1)
_ELECTION_ID = ObjectId("7fffffff0000000000000001")  # term 1, as a real primary encodes it
_START = Timestamp(1, 1)  # the cluster time before any entry exists


def _wall(ts: Timestamp | None) -> datetime.datetime:
    return (ts or _START).as_datetime()


def _optime(ts: Timestamp | None) -> Body:
    return {"ts": ts or _START, "t": _TERM}


class EmulatedReplicaSet(EmulatedNode):
    """A one-member replica set (one shard) serving ``local.oplog.rs``.

    Example::

        with EmulatedReplicaSet("shard0") as rs:
            rs.append({"ts": Timestamp(10, 1), "op": "n", "o": {"msg": "x"}})
            client = MongoClient(rs.uri)
    """

    def __init__(self, name: str = "rs0", *, max_wire_version: int = 21) -> None:
        """Create a stopped replica set.

        Args:
            name: The ``setName``.
            max_wire_version: 21 (7.0) or 25 (8.0).
        """
        super().__init__(max_wire_version=max_wire_version)
        self.name = name
        self.oplog = OplogStore()
        self._commands["replsetgetstatus"] = self._repl_set_get_status
        self._commands["replsetgetconfig"] = self._repl_set_get_config
        self.replica_set_id = ObjectId()  # generated at replSetInitiate on a real set
        # Writes and DDL apply to self.store and log to self.oplog, as a primary's do.
        writes = self._writes = WritePath(self.store, OplogWriter(self.oplog))
        for commands in (WriteCommands(writes), DdlCommands(writes), IndexCommands(writes)):
            commands.register(self._commands)
        writes.transactions.register(self._commands)
        CatalogCommands(self.store).register(self._commands)
        self.write_block = UserWriteBlock()  # wraps the write handlers registered above
        self.write_block.register(self._commands)

    @property
    def uri(self) -> str:
        """A replica-set URI (discovery through ``hosts``/``setName``)."""
        return f"mongodb://{self.host}/?replicaSet={self.name}"

    @property
    def direct_uri(self) -> str:
        """A ``directConnection=true`` URI to this member."""
        return f"mongodb://{self.host}/?directConnection=true"

    @property
    def shard_host(self) -> str:
        """The ``config.shards`` host string: ``name/127.0.0.1:port``."""
        return f"{self.name}/{self.host}"

    @property
    def transactions(self) -> TransactionTable:
        """The node's open transactions (mongos commits a cross-shard one through them)."""
        return self._writes.transactions

    @property
    def oplog_writer(self) -> OplogWriter:
        """What stamps and appends this node's writes."""
        return self._writes.oplog

    # -- oplog control -----------------------------------------------------------------

    def append(self, entry: Mapping[str, Any]) -> RawBSONDocument:
        """Append one oplog entry (its ``ts`` must increase) and wake waiting getMores."""
        return self.oplog.append(entry)

    def log_write(self, body: Mapping[str, Any], *, after: Timestamp | None = None) -> Timestamp:
        """Log ``body`` (an entry without its optime) as this node's next write; return its ts.

        For what mongos asks a shard to log itself, such as the ``shardCollection`` no-op.

        Args:
            body: ``op``, ``ns``, ``ui``, ``o``, ``o2``.
            after: a cluster time the entry must follow (the mongos's, gossiped).
        """
        with self.store.lock:  # oplog order is the order of applied changes
            if after is not None:
                self._writes.oplog.advance(after)
            return self._writes.oplog.write(body)

    def set_majority(self, ts: Timestamp) -> None:
        """Move the majority commit point to ``ts`` (never backwards)."""
        self.oplog.set_majority(ts)

    def roll_over(self, first_ts: Timestamp) -> int:
        """Truncate the oplog front so the first entry is the one at or after ``first_ts``.

        An open cursor whose position falls off gets ``CappedPositionLost`` (136) on its next
        getMore. A new ``find`` from a fallen-off ts is *not* an error, as on a real server:
        it returns entries from the new first one, and the reader must notice that its
        resume ts is missing.

        Returns:
            How many entries were dropped.
        """
        return self.oplog.truncate_before(first_ts)

    # -- role --------------------------------------------------------------------------

    def cluster_time(self) -> Timestamp:
        """The newest oplog ts (or a fixed start time while the oplog is empty)."""
        return self.oplog.last_ts or _START

    def role_fields(self) -> Body:
        """The replica-set ``hello`` fields of a primary."""
        last, majority = self.oplog.last_ts, self.oplog.majority
        return {
            "isWritablePrimary": True,
            "hosts": [self.host],
            "setName": self.name,
            "setVersion": 1,
            "secondary": False,
            "primary": self.host,
            "me": self.host,
            "electionId": _ELECTION_ID,
            "lastWrite": {
                "opTime": _optime(last),
                "lastWriteDate": _wall(last),
                "majorityOpTime": _optime(majority),
                "majorityWriteDate": _wall(majority),
            },
        }

    def observe_cluster_time(self, body: Body) -> None:
        """Advance the write clock past the request's ``$clusterTime``, as mongod does.

        Through mongos this orders the shards' writes: a no-op written on one shard after
        a write on another gets a later ``ts``, so a merged stream can pass that write.
        """
        gossip = body.get("$clusterTime")
        if isinstance(gossip, Mapping) and isinstance(gossip.get("clusterTime"), Timestamp):
            self._writes.oplog.advance(gossip["clusterTime"])

    def make_cursor(self, ns: str, body: Body) -> ServerCursor:
        """Serve ``local.oplog.rs`` from the oplog; other namespaces as plain collections."""
        if ns != OPLOG_NS:
            return super().make_cursor(ns, body)
        read_concern = body.get("readConcern") or {}
        return OplogCursor(
            self.oplog,
            body.get("filter") or {},
            tailable=bool(body.get("tailable")),
            await_data=bool(body.get("awaitData")),
            majority_only=read_concern.get("level") == "majority",
        )

    def collection_docs(self, ns: str) -> list[Any]:
        """Plain collections, plus the oplog readable as one."""
        if ns == OPLOG_NS:
            return list(self.oplog.entries())
        return super().collection_docs(ns)

    def _repl_set_get_config(self, _body: Body) -> Body:
        member = {"_id": 0, "host": self.host, "votes": 1, "priority": 1.0}
        settings = {"replicaSetId": self.replica_set_id}
        config = {"_id": self.name, "version": 1, "term": _TERM, "members": [member]}
        return {"config": {**config, "settings": settings}, "ok": 1.0}

    def _repl_set_get_status(self, _body: Body) -> Body:
        last, majority = self.oplog.last_ts, self.oplog.majority
        applied, committed = _optime(last), _optime(majority)
        return {
            "set": self.name,
            "date": datetime.datetime.now(datetime.UTC),
            "myState": 1,
            "term": _TERM,
            "heartbeatIntervalMillis": Int64(2000),
            "majorityVoteCount": 1,
            "writeMajorityCount": 1,
            "votingMembersCount": 1,
            "writableVotingMembersCount": 1,
            "optimes": {
                "lastCommittedOpTime": committed,
                "lastCommittedWallTime": _wall(majority),
                "readConcernMajorityOpTime": committed,
                "appliedOpTime": applied,
                "durableOpTime": applied,
                "lastAppliedWallTime": _wall(last),
                "lastDurableWallTime": _wall(last),
            },
            "members": [
                {
                    "_id": 0,
                    "name": self.host,
                    "health": 1.0,
                    "state": 1,
                    "stateStr": "PRIMARY",
                    "optime": applied,
                    "optimeDate": _wall(last),
                    "self": True,
                }
            ],
            "ok": 1.0,
        }
