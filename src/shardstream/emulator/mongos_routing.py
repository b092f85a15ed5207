"""Emulator: how the emulated mongos routes writes, DDL and catalog reads to its shards.

Every unsharded collection a client creates or writes through mongos lives on the
cluster's *primary shard*, the first shard (in creation order), as a database's primary
shard holds its unsharded collections. So DDL and ``listCollections`` / ``listIndexes``
are forwarded to it (in-process, through :meth:`EmulatedNode.run_command`) with the
mongos's cluster time gossiped in ``$clusterTime`` (:func:`gossip`). CRUD is
``chunk_routing``'s (a sharded collection's writes go to the shards owning their chunks,
the rest here too), the transaction commands ``transaction_router``'s.

Reads keep their wider routing: ``find`` and ``aggregate`` (and ``count``, so they agree)
read every shard, so documents a test loads on another shard are still seen;
``listDatabases`` sums every shard's databases, ``appendOplogNote`` writes its no-op on
every shard, and ``setUserWriteBlockMode`` sets (or lifts) every shard's write block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.emulator.catalog_commands import count_handler, database_lister
from shardstream.emulator.faults import CommandError
from shardstream.emulator.node import EmulatedNode
from shardstream.emulator.user_write_block import parse_block_mode
from shardstream.emulator.write_path import USER_DDL

Body = dict[str, Any]
Handler = Callable[[Body], Body]
TO_PRIMARY_SHARD: Final = (*USER_DDL, "listcollections", "listindexes")


def gossip(body: Body, now: Timestamp) -> Body:
    """``body`` with the newest cluster time the mongos knows (``now``, or the client's).

    As a real mongos does, so that a shard logs its next write after every shard's last.
    """
    sent = (body.get("$clusterTime") or {}).get("clusterTime")
    if isinstance(sent, Timestamp) and sent > now:
        now = sent
    return {**body, "$clusterTime": {**(body.get("$clusterTime") or {}), "clusterTime": now}}


def register_routing(
    commands: dict[str, Handler],
    shards: Callable[[], Sequence[EmulatedNode]],
    documents: Callable[[str], list[Any]],
    cluster_time: Callable[[], Timestamp],
) -> None:
    """Add the routed commands to a mongos's command table.

    Args:
        commands: The mongos's handlers (lower-case names).
        shards: The current shards, in creation order; the first is the primary shard.
        documents: What ``find`` reads for a namespace (every shard's documents).
        cluster_time: The mongos's cluster time, gossiped to the shards it forwards to.
    """

    def gossiped(body: Body) -> Body:
        return gossip(body, cluster_time())

    def primary() -> EmulatedNode:
        current = shards()
        if not current:
            raise CommandError(70, "ShardNotFound", "the cluster has no shards")
        return current[0]

    def forward(body: Body) -> Body:
        return primary().run_command(gossiped(body))

    def to_every_shard(body: Body) -> Body:
        if next(iter(body), "").lower() == "setuserwriteblockmode":
            parse_block_mode(body)  # refused here, before any shard takes it
        for shard in shards():
            shard.run_command(gossiped(body))
        return {"ok": 1.0}

    for name in TO_PRIMARY_SHARD:
        commands[name] = forward
    commands["appendoplognote"] = to_every_shard
    commands["setuserwriteblockmode"] = to_every_shard
    commands["listdatabases"] = database_lister(lambda: [shard.store for shard in shards()])
    commands["count"] = count_handler(documents)
