"""Emulator: a sharded cluster — an emulated mongos in front of emulated shards.

The mongos answers what shard discovery needs: ``hello`` with ``msg: "isdbgrid"``,
``listShards`` and ``find`` on ``config.shards``, whose ``host`` strings
(``name/127.0.0.1:port``) point at the emulated replica sets, so real discovery code
reaches the shards without any address mapping; ``getShardMap`` names the config
server too, whose oplog records every shard added or removed while the cluster runs.
Writes and DDL of unsharded collections are forwarded to the first shard (the primary);
``find`` reads every shard (see ``mongos_routing``). ``enableSharding`` and
``shardCollection`` record a collection as sharded in ``config.collections`` (which
``find`` reads from the config server) with its chunks (``chunk_migration``), by which its
writes are routed (``chunk_routing``); :meth:`EmulatedCluster.shard_collection` declares
one for a test (one chunk, on the first shard), :meth:`EmulatedCluster.move_chunk` and
:meth:`EmulatedCluster.balancer` migrate chunks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from bson.timestamp import Timestamp

from shardstream.emulator.acknowledge_only import AcknowledgeOnly
from shardstream.emulator.chunk_migration import Balancer, ChunkCatalog
from shardstream.emulator.chunk_routing import ChunkRouter
from shardstream.emulator.config_server import CONFIG_VERSION_NS, EmulatedConfigServer
from shardstream.emulator.faults import require_admin
from shardstream.emulator.mongos_routing import register_routing
from shardstream.emulator.node import Body, EmulatedNode
from shardstream.emulator.replica_set import EmulatedReplicaSet
from shardstream.emulator.sharding_commands import CATALOG_NAMESPACES, ShardingCatalog
from shardstream.emulator.update_targeting import update_targeting

_START = Timestamp(1, 1)


class EmulatedMongos(EmulatedNode):
    """The mongos endpoint; it reads the shard list from its cluster."""

    def __init__(self, cluster: EmulatedCluster, *, max_wire_version: int = 21) -> None:
        """Create a stopped mongos for ``cluster``."""
        super().__init__(max_wire_version=max_wire_version)
        self._cluster = cluster
        self._commands["listshards"] = self._list_shards
        self._commands["getshardmap"] = self._get_shard_map
        # Writes and DDL go to the primary shard (the first); see mongos_routing. CRUD of
        # a collection with chunks goes by them (chunk_routing), its DDL to every shard.
        register_routing(
            self._commands, lambda: cluster.shards, self.collection_docs, self.cluster_time
        )
        self.sharding = ShardingCatalog(
            cluster.config.store,
            lambda: cluster.shards,
            self.dispatch,
            self.cluster_time,
            on_sharded=lambda entry, spread: self.chunks.created(entry, spread=spread),
        )
        self.chunks = ChunkCatalog(lambda: cluster.shards, self.sharding.sharded)
        ChunkRouter(
            lambda: cluster.shards, self.chunks.for_ns, self.cluster_time, self.chunks.lock
        ).register(self._commands)
        self.chunks.register(self._commands)
        self.sharding.register(self._commands)
        self._commands["update"] = update_targeting(
            self._commands["update"], self.sharding.sharded, max_wire_version
        )

    def acknowledge_only(self, databases: Iterable[str]) -> AcknowledgeOnly:
        """From now on, answer CRUD on ``databases`` without applying it (a benchmark's
        target that costs only the acknowledgement; see :mod:`.acknowledge_only`)."""
        mode = AcknowledgeOnly(databases)
        mode.wrap(self._commands)
        return mode

    def cluster_time(self) -> Timestamp:
        """The highest cluster time among the shards and the config server."""
        times = [shard.cluster_time() for shard in self._cluster.shards]
        return max([*times, self._cluster.config.cluster_time()])

    def role_fields(self) -> Body:
        """``msg: isdbgrid`` marks a mongos; without it pymongo sees a Standalone."""
        return {"isWritablePrimary": True, "msg": "isdbgrid"}

    def collection_docs(self, ns: str) -> list[Any]:
        """``config.shards`` is generated from the live shard list."""
        if ns == "config.shards":
            return self._cluster.shard_documents()
        if ns in (*CATALOG_NAMESPACES, CONFIG_VERSION_NS):  # the config server's
            return self._cluster.config.store.documents(ns)
        # mongos holds no user data: like the router, answer a find from every shard, and
        # of a collection with chunks only what each shard owns (not a migration's copies).
        chunks = self.chunks.for_ns(ns)
        routed = [
            doc
            for shard in self._cluster.shards
            for doc in shard.collection_docs(ns)
            if chunks is None or chunks.owner(doc) == shard.name
        ]
        return super().collection_docs(ns) + routed

    def _list_shards(self, body: Body) -> Body:
        require_admin(body, "listShards")
        return {"shards": self._cluster.shard_documents(), "ok": 1.0}

    def _get_shard_map(self, body: Body) -> Body:
        require_admin(body, "getShardMap")
        # As on a real mongos, the config server is always listed, under the id "config".
        hosts = {"config": self._cluster.config.shard_host}
        hosts.update((shard.name, shard.shard_host) for shard in self._cluster.shards)
        return {"map": hosts, "connStrings": hosts, "ok": 1.0}


class EmulatedCluster:
    """A mongos plus N single-node replica-set shards, all on 127.0.0.1.

    Example::

        with EmulatedCluster(shards=2) as cluster:
            client = MongoClient(cluster.uri)
            cluster.shards[0].append({...})
    """

    def __init__(self, shards: int = 2, *, max_wire_version: int = 21) -> None:
        """Create a stopped cluster.

        Args:
            shards: How many shards to create (named ``shard00``, ``shard01``, ...).
            max_wire_version: Reported by every node: 21 (7.0) or 25 (8.0).
        """
        self.max_wire_version = max_wire_version
        self._lock = threading.Lock()
        self._shards: dict[str, EmulatedReplicaSet] = {}
        self._names = iter(range(10_000))  # bounded supply of shard numbers
        self._running = False
        self._topology_times: dict[str, Timestamp] = {}
        self._retired: list[EmulatedReplicaSet] = []  # removed shards, still running
        self.config = EmulatedConfigServer(self._majority_time, max_wire_version=max_wire_version)
        self.mongos = EmulatedMongos(self, max_wire_version=max_wire_version)
        for _ in range(shards):
            self._new_shard(None)

    def _new_shard(self, name: str | None) -> EmulatedReplicaSet:
        name = name or f"shard{next(self._names):02d}"
        shard = EmulatedReplicaSet(name, max_wire_version=self.max_wire_version)
        with self._lock:
            if name in self._shards:
                raise ValueError(f"shard {name!r} exists")
            self._shards[name] = shard
        return shard

    @property
    def shards(self) -> list[EmulatedReplicaSet]:
        """The current shards, in creation order."""
        with self._lock:
            return list(self._shards.values())

    def shard(self, name: str) -> EmulatedReplicaSet:
        """The shard called ``name``."""
        with self._lock:
            return self._shards[name]

    def noop_on_every_shard(self, floor: Timestamp = _START) -> Timestamp:
        """Log a periodic no-op on every shard one second after the newest entry of any
        (``floor`` where none has any), majority-committed; return its time.

        What mongod's periodic no-op writer leaves behind on an idle cluster: every
        shard's position passes everything logged so far, so a merged stream releases it.
        """
        shards = self.shards
        newest = max((shard.oplog.last_ts or floor) for shard in shards)
        end = Timestamp(newest.time + 1, 1)
        for shard in shards:
            shard.append({"op": "n", "ns": "", "o": {"msg": "periodic noop"}, "ts": end})
            shard.set_majority(end)
        return end

    def shard_documents(self) -> list[Body]:
        """The ``config.shards`` / ``listShards`` documents for the current shards."""
        return [
            {
                "_id": shard.name,
                "host": shard.shard_host,
                "state": 1,
                "topologyTime": self._topology_times.get(shard.name, _START),
            }
            for shard in self.shards
        ]

    def shard_collection(
        self, ns: str, key: Mapping[str, Any], *, unique: bool = False
    ) -> dict[str, Any]:
        """Declare ``ns`` sharded on ``key``, as a fixture: nothing is logged.

        ``config.collections`` shows it from then on; the collection is created on the
        first shard if missing (with a shard-key index if it has none), and its one chunk
        stays there until moved. Returns the ``config.collections`` entry.

        Raises:
            CommandError: ``BadValue`` for a key that is no shard-key pattern.
        """
        return self.mongos.sharding.declare(ns, key, unique=unique)

    def move_chunk(self, ns: str, find: Mapping[str, Any], to: str) -> None:
        """Migrate the chunk of ``ns`` holding ``find``'s key value to shard ``to``."""
        self.mongos.run_command({"moveChunk": ns, "find": dict(find), "to": to, "$db": "admin"})

    def balancer(self, interval_s: float, seed: int = 0) -> Balancer:
        """A started chunk mover: one migration every ``interval_s`` (``stop()`` it)."""
        return Balancer(self.mongos.chunks, lambda: self.shards, interval_s, seed).start()

    @property
    def uri(self) -> str:
        """The mongos URI."""
        return f"mongodb://{self.mongos.host}/"

    def add_shard(
        self, name: str | None = None, *, ts: Timestamp | None = None
    ) -> EmulatedReplicaSet:
        """Create a shard (started if the cluster runs), list it, and log its addition.

        Args:
            name: the shard's name (default ``shardNN``).
            ts: when the config server logs the addition; default: just after the
                newest entry of any shard or of the config server.
        """
        shard = self._new_shard(name)
        if self._running:
            shard.start()
        ts = ts or self._next_time()
        self._topology_times[shard.name] = ts
        self.config.record_shard_added(ts, self.shard_documents()[-1])
        return shard

    def remove_shard(
        self, name: str, *, ts: Timestamp | None = None, stop: bool = False
    ) -> EmulatedReplicaSet:
        """Unlist the shard ``name`` and log its removal at ``ts`` (default: next).

        As after a real ``removeShard``, the replica set keeps running (its cursors can
        still be read) unless ``stop``; the cluster stops it with everything else.
        """
        ts = ts or self._next_time()
        with self._lock:
            shard = self._shards.pop(name)
            self._retired.append(shard)
        self.config.record_shard_removed(ts, name)
        if stop:
            shard.stop()
        return shard

    def _next_time(self) -> Timestamp:
        newest = self.mongos.cluster_time()
        return Timestamp(newest.time, newest.inc + 1)

    def _majority_time(self) -> Timestamp | None:
        points = [p for p in (shard.oplog.majority for shard in self.shards) if p is not None]
        return max(points, default=None)

    def start(self) -> Self:
        """Start the config server, every shard, then the mongos."""
        self.config.start()
        for shard in self.shards:
            shard.start()
        self.mongos.start()
        self._running = True
        return self

    def stop(self) -> None:
        """Stop the mongos, every shard and the config server, joining their threads."""
        self._running = False
        self.mongos.stop()
        for shard in [*self.shards, *self._retired]:
            shard.stop()
        self.config.stop()

    def __enter__(self) -> Self:
        """Start the cluster."""
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the cluster."""
        self.stop()
