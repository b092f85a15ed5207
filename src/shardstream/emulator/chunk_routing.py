"""Emulator: mongos routing CRUD by chunks, and committing cross-shard transactions.

Every ``insert``, ``update`` and ``delete`` through the emulated mongos goes one operation
at a time to the shard that owns it: for a collection with chunks (``chunk_map``) the owner
of the document's shard key value (an insert), of the query's exact key value, or, when
the query names none, every shard holding chunks (a multi-document write; a single-document
one goes to the first shard where it matches, and an upsert that matched nowhere to the
owner of the document it inserts); any other collection lives on the primary shard. Write
errors keep the batch's indexes, and an ordered batch stops at the first. An update that
moves a document's key value into another shard's chunk moves the document: deleted on
its shard and inserted on the owner, as mongos's ``WouldChangeOwningShard`` handling does
(mongos does both in an internal transaction; here they are two plain writes).

Statements in a transaction go through ``transaction_router`` (each shard's first one
starts the transaction there), which also commits and aborts it on its participants.

DDL on a collection whose documents span shards (``drop``, ``renameCollection``,
``dropDatabase``, index commands, ``collMod``) runs on the primary shard as before, then on
every other shard holding the namespace with its entries marked ``fromMigrate``, so a
change stream reports it once.

See also src/mongo/s/write_ops/batch_write_exec.cpp.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.emulator.chunk_map import ChunkMap
from shardstream.emulator.faults import CommandError
from shardstream.emulator.mongos_routing import gossip
from shardstream.emulator.replica_set import EmulatedReplicaSet
from shardstream.emulator.transaction_router import TransactionRouter
from shardstream.emulator.write_commands import post_image
from shardstream.emulator.write_path import USER_DDL, namespace

Body = dict[str, Any]
Handler = Callable[[Body], Body]
# DDL that reaches every shard holding a spread collection (a create reaches one).
SPREAD_DDL: Final = tuple(name for name in USER_DDL if name != "create")
_FIELDS: Final = {"insert": "documents", "update": "updates", "delete": "deletes"}


@contextlib.contextmanager
def migrating(shard: EmulatedReplicaSet) -> Iterator[None]:
    """While held, ``shard``'s writes are logged ``fromMigrate`` (and nothing else writes)."""
    with shard.store.lock:
        shard.oplog_writer.from_migrate = True
        try:
            yield
        finally:
            shard.oplog_writer.from_migrate = False


class ChunkRouter:
    """The mongos's write routing over the shards' chunks."""

    def __init__(
        self,
        shards: Callable[[], Sequence[EmulatedReplicaSet]],
        chunks: Callable[[str], ChunkMap | None],
        cluster_time: Callable[[], Timestamp],
        placing: contextlib.AbstractContextManager[Any],
    ) -> None:
        """Args: the current shards (the first is the primary), the chunk map of a
        namespace (None: unsharded), the mongos's cluster time to gossip, and the lock a
        migration holds (each write is placed and sent under it)."""
        self._placing = placing
        self._shards = shards
        self._chunks = chunks
        self._cluster_time = cluster_time
        self.transactions = TransactionRouter(shards, cluster_time)

    def register(self, commands: dict[str, Handler]) -> None:
        """Route the CRUD and transaction commands; spread DDL (wrapping what is there)."""
        commands["insert"] = self.insert
        commands["update"] = self.update
        commands["delete"] = self.delete
        commands["committransaction"] = self.transactions.commit
        commands["aborttransaction"] = self.transactions.abort
        for name in SPREAD_DDL:
            commands[name] = self._spread(commands[name])

    # -- shards ------------------------------------------------------------------------

    def _by_name(self) -> dict[str, EmulatedReplicaSet]:
        shards = self._shards()
        if not shards:
            raise CommandError(70, "ShardNotFound", "the cluster has no shards")
        return {shard.name: shard for shard in shards}

    def _send(self, shard: EmulatedReplicaSet, body: Body) -> Body:
        """``body`` to ``shard``, as one statement of the client's transaction if any."""
        return shard.run_command(gossip(self.transactions.join(shard, body), self._cluster_time()))

    # -- CRUD --------------------------------------------------------------------------

    def insert(self, body: Body) -> Body:
        """Answer ``insert``, each document on its owner."""
        chunks, shards = self._chunks(namespace(body, "insert")), self._by_name()
        primary = next(iter(shards.values()))

        def owners(document: Any) -> list[EmulatedReplicaSet]:
            is_doc = isinstance(document, dict)
            return [primary if chunks is None or not is_doc else shards[chunks.owner(document)]]

        return self._each(body, "insert", owners)

    def update(self, body: Body) -> Body:
        """Answer ``update``, each operation where its query can match."""
        return self._each(body, "update", self._query_owners(body, "update"))

    def delete(self, body: Body) -> Body:
        """Answer ``delete``, each operation where its query can match."""
        return self._each(body, "delete", self._query_owners(body, "delete"))

    def _query_owners(self, body: Body, command: str) -> Callable[[Any], list[EmulatedReplicaSet]]:
        chunks, shards = self._chunks(namespace(body, command)), self._by_name()
        primary = next(iter(shards.values()))

        def owners(op: Any) -> list[EmulatedReplicaSet]:
            query = op.get("q") if isinstance(op, dict) else None
            if chunks is None or not isinstance(query, dict):
                return [primary]
            owner = chunks.owner_of_query(query)
            if owner is not None:
                return [shards[owner]]
            holding = chunks.shards()
            return [shard for name, shard in shards.items() if name in holding]

        return owners

    def _each(
        self, body: Body, command: str, owners: Callable[[Any], list[EmulatedReplicaSet]]
    ) -> Body:
        with self._placing:
            return self._placed(body, command, owners)

    def _placed(
        self, body: Body, command: str, owners: Callable[[Any], list[EmulatedReplicaSet]]
    ) -> Body:
        body = self.transactions.begin(body)
        field = _FIELDS[command]
        ops = body.get(field)
        if not isinstance(ops, list):
            return self._send(next(iter(self._by_name().values())), body)  # its own error
        ordered = body.get("ordered", True) is not False
        totals: Body = {"n": 0}
        errors: list[Body] = []
        upserted: list[Body] = []
        for index, op in enumerate(ops):
            reply = self._one(body, field, command, op, owners(op))
            totals["n"] += reply.get("n", 0)
            if "nModified" in reply:
                totals["nModified"] = totals.get("nModified", 0) + reply["nModified"]
            upserted += [{**u, "index": index} for u in reply.get("upserted", [])]
            errors += [{**e, "index": index} for e in reply.get("writeErrors", [])]
            if errors and ordered:
                break
        if command == "update":
            totals.setdefault("nModified", 0)
        if upserted:
            totals["upserted"] = upserted
        if errors:
            totals["writeErrors"] = errors
        return {**totals, "ok": 1.0}

    def _one(
        self, body: Body, field: str, command: str, op: Any, targets: list[EmulatedReplicaSet]
    ) -> Body:
        """One operation on its shards: all of them for a multi write, else the first
        where it matches (an upsert matching nowhere then goes where it inserts)."""
        single = {**body, field: [op]}
        multi = command == "insert" or len(targets) == 1
        multi = multi or (op.get("multi") if command == "update" else op.get("limit") == 0)
        moved = self._moved_by_key(body, op, targets) if command == "update" else None
        if moved is not None:
            return moved
        if multi:
            replies = [self._send(shard, single) for shard in targets]
            reply = _summed(replies)
        else:
            probe = {**op, "upsert": False} if command == "update" else op
            reply = {"n": 0, "ok": 1.0}
            for shard in targets:
                reply = self._send(shard, {**body, field: [probe]})
                if reply.get("n") or reply.get("writeErrors"):
                    break
            if command == "update" and op.get("upsert") and not reply.get("n"):
                reply = self._send(targets[0], single)
        return reply

    def _moved_by_key(self, body: Body, op: Any, targets: list[EmulatedReplicaSet]) -> Body | None:
        """An update that would put its document in another shard's chunk, done as mongos
        does (``WouldChangeOwningShard``): deleted on its shard, inserted on the owner; the
        reply, or None when the update stays on its shard."""
        ns = namespace(body, "update")
        chunks = self._chunks(ns)
        query = op.get("q")
        if chunks is None or not isinstance(query, dict):
            return None
        if op.get("multi") or not _may_change_key(op.get("u"), chunks.pattern):
            return None
        shards = self._by_name()
        for shard in targets:
            coll = shard.store.get(ns)
            found = coll.find(query, limit=1) if coll is not None else []
            if not found:
                continue
            post = post_image(found[0], op.get("u"), op.get("arrayFilters") or [], inserting=False)
            owner = chunks.owner(post)
            if owner == shard.name:
                return None
            session: Body = {k: body[k] for k in ("lsid", "txnNumber", "autocommit") if k in body}
            name, db = ns.partition(".")[2], body["$db"]
            one = {"q": {"_id": found[0]["_id"]}, "limit": 1}
            self._send(shard, {"delete": name, "$db": db, **session, "deletes": [one]})
            self._send(shards[owner], {"insert": name, "$db": db, **session, "documents": [post]})
            return {"n": 1, "nModified": 1, "ok": 1.0}
        return None

    # -- DDL ---------------------------------------------------------------------------

    def _spread(self, handler: Handler) -> Handler:
        def run(body: Body) -> Body:
            command = next(iter(body)).lower()
            db = body.get("$db")
            if command == "renamecollection":
                named = [str(body.get("renameCollection"))]
            elif command == "dropdatabase":
                shards = self._shards()
                named = sorted(
                    {n for s in shards for n in s.store.namespaces() if n.startswith(f"{db}.")}
                )
            else:
                named = [f"{db}.{body.get(next(iter(body)))}"]
            # Decided before the primary runs it: a drop forgets the chunks.
            spread = [ns for ns in named if self._chunks(ns) is not None]
            reply = handler(body)  # the primary shard's, logged as the event
            for shard in list(self._by_name().values())[1:]:
                if any(ns in shard.store.namespaces() for ns in spread):
                    with migrating(shard):
                        shard.run_command(gossip(body, self._cluster_time()))
            return reply

        return run


def _may_change_key(update: Any, pattern: dict[str, Any]) -> bool:
    """Whether an update's ``u`` can change a shard key field (a replacement or a pipeline
    can; operators only on a key path, a parent or a child of one)."""
    if not isinstance(update, dict) or not all(str(k).startswith("$") for k in update):
        return True
    paths = [str(path) for fields in update.values() if isinstance(fields, dict) for path in fields]
    return any(
        path == key or key.startswith(f"{path}.") or path.startswith(f"{key}.")
        for path in paths
        for key in pattern
    )


def _summed(replies: list[Body]) -> Body:
    total: Body = {"n": sum(r.get("n", 0) for r in replies), "ok": 1.0}
    if any("nModified" in r for r in replies):
        total["nModified"] = sum(r.get("nModified", 0) for r in replies)
    errors = [e for r in replies for e in r.get("writeErrors", [])]
    upserted = [u for r in replies for u in r.get("upserted", [])]
    if errors:
        total["writeErrors"] = errors
    if upserted:
        total["upserted"] = upserted
    return total
