"""Emulator: the sharding catalog and the mongos commands that write it.

``enableSharding`` records a database in ``config.databases``; ``shardCollection`` records a
collection with its key in ``config.collections`` (``_id`` the namespace, ``key``,
``unique``, ``uuid`` ..., as a 5.0+ config server keeps it), after creating the collection
on the primary shard if it is missing and the shard-key index if the collection is empty
and has none, each logged there as mongod logs it, then the ``shardCollection`` no-op a
change stream reports. :meth:`ShardingCatalog.declare` does the same for a test fixture
without logging anything, so a source cluster can hold a sharded collection at T0.

Each collection recorded gets its chunks (``on_sharded``, kept by ``chunk_migration``): a
hashed key of an empty collection spread over the shards, anything else (a fixture's
``declare`` too) one chunk on the primary shard; ``chunk_routing`` routes by them. The
emulator answers as
mongod 6.0+ does, where ``enableSharding`` is optional; ``drop``, ``dropDatabase`` and
``renameCollection`` through mongos keep the catalog in step.

See also src/mongo/s/commands/cluster_shard_collection_cmd.cpp and
src/mongo/db/s/shardsvr_create_collection_command.cpp.
"""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.emulator.document_store import DocumentStore, id_key, same_bson
from shardstream.emulator.faults import CommandError, require_admin
from shardstream.emulator.index_keys import index_spec
from shardstream.emulator.replica_set import EmulatedReplicaSet
from shardstream.emulator.shard_key_pattern import index_for, serves, shard_key
from shardstream.emulator.write_path import arguments

Body = dict[str, Any]
Handler = Callable[[Body], Body]
COLLECTIONS_NS: Final = "config.collections"
DATABASES_NS: Final = "config.databases"
CATALOG_NAMESPACES: Final = (COLLECTIONS_NS, DATABASES_NS)
# shardCollection options that change nothing here: there are no chunks to create.
_ACCEPTED: Final = frozenset(
    {"key", "unique", "collation", "numInitialChunks", "presplitHashedZones"}
)


class ShardingCatalog:
    """``config.collections`` / ``config.databases`` on the config server, and their commands.

    Args:
        config_store: the config server's store, which holds the catalog.
        shards: the current shards; the first is every database's primary shard.
        dispatch: runs a command as the mongos would (routed, cluster time gossiped).
        cluster_time: the mongos's cluster time, the catalog entries' ``timestamp``.
    """

    def __init__(
        self,
        config_store: DocumentStore,
        shards: Callable[[], Sequence[EmulatedReplicaSet]],
        dispatch: Handler,
        cluster_time: Callable[[], Timestamp],
        on_sharded: Callable[[Body, bool], None] | None = None,
    ) -> None:
        """Keep the catalog in ``config_store``; ``on_sharded(entry, spread)`` is told of
        each collection recorded (spread: presplit over the shards)."""
        self._on_sharded = on_sharded
        self._catalog = config_store
        self._shards = shards
        self._dispatch = dispatch
        self._cluster_time = cluster_time
        self._lock = threading.Lock()  # one sharding command at a time, as the DDL lock does

    def register(self, commands: dict[str, Handler]) -> None:
        """Add the sharding commands to a mongos's table; keep drops and renames in step."""
        commands["enablesharding"] = self.enable_sharding
        commands["shardcollection"] = self.shard_collection
        for name in ("drop", "dropdatabase", "renamecollection"):
            commands[name] = self._then_forget(commands[name])

    def sharded(self, ns: str) -> Body | None:
        """The ``config.collections`` entry of ``ns``, if it is sharded."""
        return self._get(COLLECTIONS_NS, ns)

    def declare(self, ns: str, key: Mapping[str, Any], *, unique: bool = False) -> Body:
        """Record ``ns`` as sharded on ``key`` without logging (a test fixture); return the entry.

        The collection is created on the primary shard if missing, with the shard-key
        index if it has none.
        """
        pattern = shard_key(key)
        store = self._primary().store
        with store.lock:
            coll = store.get(ns) or store.create(ns, {})
            if not any(serves(spec, pattern, unique) for spec in coll.indexes):
                coll.add_index(index_spec(index_for(pattern, unique)))
            return self._record(ns, pattern, unique, coll.ui, spread=False)

    def enable_sharding(self, body: Body) -> Body:
        """Answer ``enableSharding``: record the database (optional since 6.0)."""
        require_admin(body, "enableSharding")
        db = body.get("enableSharding")
        if not isinstance(db, str) or not db or "." in db or db in ("admin", "local"):
            raise CommandError(73, "InvalidNamespace", f"invalid database name {db!r}")
        with self._lock:
            self._database(db)
        return {"ok": 1.0}

    def shard_collection(self, body: Body) -> Body:
        """Answer ``shardCollection``: create what is missing, record, log the no-op."""
        require_admin(body, "shardCollection")
        given = body.get("shardCollection")
        ns = given if isinstance(given, str) else ""
        db, _, name = ns.partition(".")
        if not db or not name:
            raise CommandError(73, "InvalidNamespace", f"Invalid namespace {given!r}")
        options = arguments(body, "shardCollection")
        unknown = set(options) - _ACCEPTED
        if unknown:
            raise CommandError(2, "BadValue", f"emulator does not shard with {min(unknown)}")
        pattern, unique = shard_key(body.get("key")), bool(body.get("unique", False))
        if unique and "hashed" in pattern.values():
            raise CommandError(72, "InvalidOptions", "hashed shard keys cannot be declared unique")
        with self._lock:
            existing = self.sharded(ns)
            if existing is not None:
                if not same_bson(existing["key"], pattern) or existing["unique"] != unique:
                    raise CommandError(
                        23,
                        "AlreadyInitialized",
                        f"sharding already enabled for collection {ns} with options {existing!r}",
                    )
                return {"collectionsharded": ns, "ok": 1.0}
            self._database(db)
            primary = self._primary()
            if primary.store.get(ns) is None:
                self._dispatch({"create": name, "$db": db})
            coll = primary.store.get(ns)
            assert coll is not None, f"{ns} was just created on the primary shard"
            self._check_collation(ns, coll.options, options.get("collation"))
            if not any(serves(spec, pattern, unique) for spec in coll.indexes):
                if coll.count():
                    raise CommandError(
                        72,
                        "InvalidOptions",
                        "Please create an index that starts with the proposed shard key "
                        "before sharding the collection",
                    )
                spec = index_for(pattern, unique)
                self._dispatch({"createIndexes": name, "indexes": [spec], "$db": db})
            spread = "hashed" in pattern.values() and not coll.count()
            self._record(ns, pattern, unique, coll.ui, spread=spread)
            o2 = {
                "shardCollection": ns,
                "shardKey": pattern,
                "unique": unique,
                "numInitialChunks": Int64(0),
                "presplitHashedZones": False,
                "capped": False,
            }
            primary.log_write(
                {
                    "op": "n",
                    "ns": ns,
                    "ui": coll.ui,
                    "o": {"msg": {"shardCollection": ns}},
                    "o2": o2,
                },
                after=self._cluster_time(),
            )
        return {"collectionsharded": ns, "ok": 1.0}

    # -- catalog -----------------------------------------------------------------------

    def _primary(self) -> EmulatedReplicaSet:
        shards = self._shards()
        if not shards:
            raise CommandError(70, "ShardNotFound", "the cluster has no shards")
        return shards[0]

    @staticmethod
    def _check_collation(ns: str, options: Mapping[str, Any], given: Any) -> None:
        simple = {"locale": "simple"}
        if given is not None and not same_bson(dict(given), simple):
            raise CommandError(
                2, "BadValue", f"shardCollection takes collation {simple}, got {given!r}"
            )
        default = options.get("collation")
        if default is not None and default.get("locale") != "simple" and given is None:
            raise CommandError(
                2,
                "BadValue",
                f"Please specify collation {simple} for {ns}: its default collation is "
                f"{dict(default)!r}",
            )

    def _database(self, db: str) -> None:
        if self._get(DATABASES_NS, db) is None:
            version = {
                "uuid": Binary(uuid.uuid4().bytes, 4),
                "timestamp": self._cluster_time(),
                "lastMod": 1,
            }
            self._put(
                DATABASES_NS, {"_id": db, "primary": self._primary().name, "version": version}
            )

    def _record(self, ns: str, key: Body, unique: bool, ui: Binary, *, spread: bool) -> Body:
        entry = {
            "_id": ns,
            "lastmodEpoch": ObjectId(),
            "lastmod": datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0),
            "timestamp": self._cluster_time(),
            "uuid": ui,
            "key": key,
            "unique": unique,
            "noBalance": False,
        }
        self._put(COLLECTIONS_NS, entry)
        if self._on_sharded is not None:
            self._on_sharded(entry, spread)
        return entry

    def _get(self, catalog: str, _id: str) -> Body | None:
        coll = self._catalog.get(catalog)
        return None if coll is None else coll.get(id_key(_id))

    def _put(self, catalog: str, entry: Body) -> None:
        with self._catalog.lock:
            coll = self._catalog.get(catalog) or self._catalog.create(catalog, {})
            key = id_key(entry["_id"])
            if coll.get(key) is None:
                coll.insert(entry)
            else:
                coll.replace(key, entry)

    def _forget(self, catalog: str, _id: str) -> Body | None:
        with self._catalog.lock:
            coll = self._catalog.get(catalog)
            key = id_key(_id)
            return coll.delete(key) if coll is not None and coll.get(key) is not None else None

    def _then_forget(self, handler: Handler) -> Handler:
        def run(body: Body) -> Body:
            reply = handler(body)
            command, db = next(iter(body)).lower(), body.get("$db")
            with self._lock:
                if command == "drop":
                    self._forget(COLLECTIONS_NS, f"{db}.{body['drop']}")
                elif command == "dropdatabase":
                    coll = self._catalog.get(COLLECTIONS_NS)
                    for entry in coll.documents() if coll is not None else []:
                        if entry["_id"].partition(".")[0] == db:
                            self._forget(COLLECTIONS_NS, entry["_id"])
                    self._forget(DATABASES_NS, str(db))
                else:  # renameCollection: the entry follows the collection
                    self._forget(COLLECTIONS_NS, str(body["to"]))
                    moved = self._forget(COLLECTIONS_NS, str(body["renameCollection"]))
                    if moved is not None:
                        self._put(COLLECTIONS_NS, {**moved, "_id": body["to"]})
            return reply

        return run
