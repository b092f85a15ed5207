"""Emulator: a wire-protocol MongoDB sharded cluster on 127.0.0.1, for tests.

Real pymongo code connects to it: a mongos (``hello`` with ``msg: "isdbgrid"``,
``listShards``, ``config.shards``) and single-node replica-set shards serving a tailable
``local.oplog.rs`` that tests append to, with a separately moved majority commit point and
one-shot faults (hang-ups, error codes, stalls, silent cursor death, oplog roll-over)::

    with EmulatedCluster(shards=2) as cluster:
        shard = cluster.shards[0]
        shard.append({"ts": Timestamp(10, 1), "op": "n", "o": {}})
        client = MongoClient(shard.uri)

A config server replica set (``cluster.config``) logs every ``add_shard`` / ``remove_shard``
as a ``config.shards`` write in its oplog, as a real one does.

The shards are writable, so an emulated cluster can be a sync's target: ``insert``,
``update`` (replacements, ``$set`` / ``$unset`` / ``$setOnInsert`` / ``$inc``, pipelines,
upserts), ``delete``, DDL and index commands, and transactions, each logged as mongod
logs it; mongos forwards every write to the first shard. ``node.load_collection(ns, docs)``
fills a collection without logging::

    shard.load_collection("db.coll", [{"_id": 1}], indexes=[{"key": {"a": 1}, "name": "a_1"}])
    MongoClient(cluster.uri).db.coll.insert_one({"_id": 2})  # logged on shards[0]

The mongos also answers ``enableSharding`` / ``shardCollection``, recording the collection
in ``config.collections``; ``cluster.shard_collection("db.coll", {"a": 1})`` declares one
sharded for a fixture, without logging. Its documents stay on the first shard.

Authentication, TLS and compression are not emulated: every connection is accepted
unauthenticated, and a ``saslStart`` gets ``CommandNotFound``.
"""

from __future__ import annotations

from shardstream.emulator.cluster import EmulatedCluster, EmulatedMongos
from shardstream.emulator.config_server import EmulatedConfigServer
from shardstream.emulator.faults import CommandError, ErrorReply, Hangup, SilentDeath, Stall
from shardstream.emulator.node import EmulatedNode
from shardstream.emulator.oplog import OplogStore
from shardstream.emulator.replica_set import EmulatedReplicaSet

__all__ = [
    "CommandError",
    "EmulatedCluster",
    "EmulatedConfigServer",
    "EmulatedMongos",
    "EmulatedNode",
    "EmulatedReplicaSet",
    "ErrorReply",
    "Hangup",
    "OplogStore",
    "SilentDeath",
    "Stall",
]
