"""Emulator: the chunk maps of a cluster, and ``split`` / ``moveChunk`` / a balancer.

:class:`ChunkCatalog` keeps each sharded collection's :class:`~.chunk_map.ChunkMap` by
collection UUID (``config.collections`` names the UUID; a rename keeps it).

``moveChunk`` (``{moveChunk: ns, find: <doc>, to: <shard>}`` or ``bounds: [low, high]``)
moves one chunk as the server's migration leaves it in the oplogs, in one step under both
shards' locks (refused while a transaction open on the donor writes the collection, which
the server's critical section would wait for): the recipient creates the collection if it
has none (same UUID, options and indexes) and clones the chunk's documents, every entry
``fromMigrate``; the donor logs the ``migrateChunkToNewShard`` no-op when the recipient
had no chunk of the collection before; ownership moves; the recipient's clock is moved
past the donor's newest entry (later writes to the chunk come after every earlier one);
the donor deletes its orphaned copies, again ``fromMigrate``.
``split`` (``{split: ns, middle: <key value>}``, hashed fields given as
their hash) cuts a chunk in two. :class:`Balancer` is a migration generator for tests (not
the server's policy): every ``interval_s`` it moves one chunk to the next shard.

See also src/mongo/db/s/migration_source_manager.cpp and migration_destination_manager.cpp.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bson.binary import Binary

from shardstream.emulator import write_oplog
from shardstream.emulator.chunk_map import ChunkMap, key_value
from shardstream.emulator.chunk_routing import migrating
from shardstream.emulator.document_store import Collection
from shardstream.emulator.faults import CommandError, require_admin
from shardstream.emulator.index_keys import ID_INDEX
from shardstream.emulator.replica_set import EmulatedReplicaSet

Body = dict[str, Any]
Handler = Callable[[Body], Body]


class ChunkCatalog:
    """Chunk maps by collection UUID, and the ``split`` / ``moveChunk`` commands."""

    def __init__(
        self,
        shards: Callable[[], Sequence[EmulatedReplicaSet]],
        sharded: Callable[[str], Body | None],
    ) -> None:
        """Args: the current shards (the first is the primary) and a namespace's
        ``config.collections`` entry (None: not sharded)."""
        self._shards = shards
        self._sharded = sharded
        self._maps: dict[bytes, ChunkMap] = {}
        # Held by a migration and by the router for each write it places: a write is never
        # sent to a shard that stops owning its chunk before it lands (mongos's shard
        # versioning, which makes a stale router retry, in one lock).
        self.lock = threading.RLock()

    def register(self, commands: dict[str, Handler]) -> None:
        """Add ``split`` and ``moveChunk`` to a mongos's table."""
        commands["split"] = self.split
        commands["movechunk"] = self.move_chunk

    def created(self, entry: Mapping[str, Any], *, spread: bool) -> None:
        """``entry`` was just recorded sharded: give it its initial chunks."""
        names = [shard.name for shard in self._shards()]
        self._maps[bytes(entry["uuid"])] = ChunkMap.initial(entry["key"], names, spread=spread)

    def for_ns(self, ns: str) -> ChunkMap | None:
        """The chunks of ``ns`` (None: not sharded)."""
        entry = self._sharded(ns)
        ui = None if entry is None else entry.get("uuid")
        return None if ui is None else self._maps.get(bytes(ui))

    def sharded_namespaces(self) -> list[str]:
        """Every namespace with chunks, for the balancer."""
        shards = self._shards()
        held = {ns for shard in shards for ns in shard.store.namespaces()}
        return sorted(ns for ns in held if self.for_ns(ns) is not None)

    def split(self, body: Body) -> Body:
        """Answer ``split`` at ``middle``."""
        require_admin(body, "split")
        ns, chunks = self._target(body, "split")
        middle = body.get("middle")
        if not isinstance(middle, Mapping) or list(middle) != list(chunks.pattern):
            raise CommandError(2, "BadValue", f"split of {ns} needs middle on {chunks.pattern}")
        chunks.split(tuple(middle.values()))
        return {"ok": 1.0}

    def move_chunk(self, body: Body) -> Body:
        """Answer ``moveChunk``: the chunk holding ``find`` (or starting at ``bounds[0]``)."""
        require_admin(body, "moveChunk")
        ns, chunks = self._target(body, "moveChunk")
        to, find, bounds = body.get("to"), body.get("find"), body.get("bounds")
        shards = {shard.name: shard for shard in self._shards()}
        if to not in shards:
            raise CommandError(70, "ShardNotFound", f"no shard {to!r}")
        if isinstance(find, Mapping):
            low = chunks.chunk_holding(find).low
        elif isinstance(bounds, list) and bounds and isinstance(bounds[0], Mapping):
            low = tuple(bounds[0].values())
        else:
            raise CommandError(9, "FailedToParse", "moveChunk needs 'find' or 'bounds'")
        self.move(ns, low, str(to))
        return {"millis": 0, "ok": 1.0}

    def _target(self, body: Body, command: str) -> tuple[str, ChunkMap]:
        ns = body.get(command)
        chunks = self.for_ns(ns) if isinstance(ns, str) else None
        if chunks is None:
            raise CommandError(61, "NamespaceNotSharded", f"{ns!r} is not sharded")
        return str(ns), chunks

    def move(self, ns: str, low: tuple[Any, ...], to: str) -> None:
        """Migrate the chunk of ``ns`` starting at ``low`` to shard ``to``."""
        chunks = self.for_ns(ns)
        assert chunks is not None, f"{ns} has chunks"
        order = self._shards()
        shards = {shard.name: shard for shard in order}
        chunk = next(c for c in chunks.chunks() if c.low == low)
        donor, recipient = shards[chunk.shard], shards[to]
        if donor is recipient:
            return
        first, second = sorted((donor, recipient), key=order.index)
        with self.lock, first.store.lock, second.store.lock:
            if ns in donor.transactions.open_namespaces():
                # The server's critical section waits for them; a test retries instead.
                raise CommandError(
                    117, "ConflictingOperationInProgress", f"open transactions write {ns}"
                )
            source = donor.store.get(ns)
            documents = [
                d
                for d in (source.documents() if source is not None else [])
                if chunk.holds(key_value(d, chunks.pattern))
            ]
            new_shard = to not in chunks.shards()
            with migrating(recipient):
                if source is not None and recipient.store.get(ns) is None:
                    _create_like(recipient, ns, source)
                if documents:
                    db, name = ns.split(".", 1)
                    recipient.run_command({"insert": name, "$db": db, "documents": documents})
            if new_shard and source is not None:
                message = (
                    f"Migrating chunk from shard {donor.name} to shard {to} with no chunks "
                    "for this collection"
                )
                o2 = {"migrateChunkToNewShard": ns, "fromShardId": donor.name, "toShardId": to}
                body = {"op": "n", "ns": ns, "ui": source.ui, "o": {"msg": message}, "o2": o2}
                donor.log_write(body)
            chunks.move(chunk.low, to)
            newest = donor.oplog.last_ts
            if newest is not None:
                recipient.oplog_writer.advance(newest)
            if documents:
                db, name = ns.split(".", 1)
                ids = [d["_id"] for d in documents]
                with migrating(donor):
                    deletes = [{"q": {"_id": {"$in": ids}}, "limit": 0}]
                    donor.run_command({"delete": name, "$db": db, "deletes": deletes})


def _create_like(shard: EmulatedReplicaSet, ns: str, source: Collection) -> None:
    """Create ``ns`` on ``shard`` as the donor holds it (same UUID), logged as mongod does."""
    coll = Collection(ns, Binary(bytes(source.ui), 4), source.options)
    shard.store.put(ns, coll)
    o = {"create": ns.partition(".")[2], **coll.options, "idIndex": dict(ID_INDEX)}
    shard.log_write(write_oplog.command(ns, coll.ui, o))
    for spec in source.indexes:
        if spec.get("name") != "_id_":
            coll.add_index(dict(spec))
            index = {"createIndexes": ns.partition(".")[2], **spec}
            shard.log_write(write_oplog.command(ns, coll.ui, index))


class Balancer:
    """Moves one chunk every ``interval_s`` to the next shard, round the shards (a test's
    migrations under load; seeded, so a run can be repeated)."""

    def __init__(
        self,
        catalog: ChunkCatalog,
        shards: Callable[[], Sequence[Any]],
        interval_s: float,
        seed: int = 0,
    ):
        self._catalog, self._shards, self._interval_s = catalog, shards, interval_s
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="emulator-balancer", daemon=True)
        self.moves = 0

    def start(self) -> Balancer:
        """Start moving chunks; return self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the move in flight."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            namespaces = self._catalog.sharded_namespaces()
            names = [shard.name for shard in self._shards()]
            if not namespaces or len(names) < 2:
                continue
            ns = self._rng.choice(namespaces)
            chunks = self._catalog.for_ns(ns)
            if chunks is None:
                continue
            chunk = self._rng.choice(chunks.chunks())
            to = names[(names.index(chunk.shard) + 1) % len(names)]
            # Dropped meanwhile, or a transaction open on it: the next tick tries another.
            with contextlib.suppress(KeyError, StopIteration, CommandError):
                self._catalog.move(ns, chunk.low, to)
                self.moves += 1
