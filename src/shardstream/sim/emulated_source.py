"""Simulator: one simulated run served live by the wire emulator, as a sync's source cluster.

The run is cut at a cluster time ``cut`` (a fraction of its CRUD events): each emulated
shard starts with its oplog up to ``cut``, and the collections hold the cluster's contents
at ``cut`` (options, indexes, documents), which is what a sync's initial copy reads
through mongos.  :meth:`SimulatedSource.feed_rest` appends the rest of the oplogs, with a
closing no-op on every shard so the merge releases the last events, and switches the
collections to the run's true final contents, which a synced target must end up equal to.

The contents at ``cut`` come from applying the run's events up to ``cut`` in the merged
order (:mod:`shardstream.sim.reference_events`; the simulator keeps only its final
state).  The final comparison is against the simulator's own ``final_state``, which no
shardstream code produced.  ``shardstream demo --sync`` and the sync tests use this::

    with SimulatedSource(SimulationConfig(seed=5, operations=260)) as source:
        ...  # sync from source.cluster.uri, then once T0 is taken:
        end = source.feed_rest()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self

from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync import NamespaceMap
from shardstream.emulator import EmulatedCluster
from shardstream.sim.apply_events import State, apply_events
from shardstream.sim.cluster import SimulatedCluster
from shardstream.sim.config import SimulationConfig
from shardstream.sim.documents import id_key
from shardstream.sim.reference_events import merged_events
from shardstream.transform import ChangeStreamOptions

Namespace = tuple[str, str]
Catalog = dict[Namespace, tuple[dict[str, Any], list[Any]]]  # ns -> (create options, indexes)
# DDL events for the catalog, the oplog's raw diffs for apply_events.
EXPANDED: Final = ChangeStreamOptions(show_expanded_events=True, show_raw_update_description=True)
_RAW: Final = CodecOptions(document_class=RawBSONDocument)


def catalog_at(events: Sequence[Mapping[str, Any]]) -> Catalog:
    """Each namespace's ``create`` options and index specs after ``events`` (expanded)."""
    catalog: Catalog = {}
    for event in events:
        ns = (event["ns"]["db"], event["ns"].get("coll"))
        description = event.get("operationDescription") or {}
        kind = event["operationType"]
        if kind == "create":
            options = {k: v for k, v in description.items() if k != "idIndex"}
            catalog.setdefault(ns, (options, []))
        elif kind == "createIndexes":
            indexes = catalog.setdefault(ns, ({}, []))[1]
            for spec in description["indexes"]:
                if all(existing["name"] != spec["name"] for existing in indexes):
                    indexes.append({k: v for k, v in spec.items() if k != "v"})
        elif kind == "modify":
            catalog.setdefault(ns, ({}, []))[0].update(
                {k: v for k, v in description.items() if k != "index"}
            )
    return catalog


def cluster_state(client: MongoClient[Any]) -> dict[Namespace, dict[bytes, bytes]]:
    """Every user collection a cluster holds, shaped as ``encoded_state`` gives the truth.

    Raw BSON bytes per ``id_key``, read through ``client`` (so field order and types
    count); the server's databases and the sync's checkpoints are left out, and so are
    empty collections, as ``encoded_state`` drops them.
    """
    scope = NamespaceMap()
    contents: dict[Namespace, dict[bytes, bytes]] = {}
    for db in client.list_database_names():
        if not scope.in_scope(db):
            continue
        for name in client[db].list_collection_names():
            if not scope.in_scope(db, name):
                continue
            collection = client[db].get_collection(name, codec_options=_RAW)
            documents = {id_key(doc["_id"]): doc.raw for doc in collection.find()}
            if documents:
                contents[(db, name)] = documents
    return contents


class SimulatedSource:
    """The emulated source cluster of one simulated run, cut at a fraction of its stream."""

    def __init__(self, config: SimulationConfig, *, cut_fraction: float = 0.4) -> None:
        """Run the simulator and prepare the shards' oplogs and the contents at the cut.

        Args:
            config: the run.
            cut_fraction: where the cut falls, as a fraction of the run's CRUD events.

        Raises:
            ValueError: ``cut_fraction`` is outside [0, 1), or the run has no CRUD event.
        """
        if not 0 <= cut_fraction < 1:
            raise ValueError(f"expected a cut_fraction in [0, 1), got {cut_fraction!r}")
        self.result = SimulatedCluster(config).run()
        events = merged_events(self.result, EXPANDED)
        crud = [event for event in events if "documentKey" in event]
        if not crud:
            raise ValueError(f"expected a run with CRUD events to cut, got none from {config!r}")
        self.cut: Timestamp = crud[int(len(crud) * cut_fraction)]["clusterTime"]
        before = [event for event in events if event["clusterTime"] <= self.cut]
        self.events_before_cut = len(before)
        self.events_after_cut = len(events) - len(before)
        self.state_at_cut: State = apply_events(before)
        self.catalog = catalog_at(before)
        self.final_catalog = catalog_at(events)
        self.cluster = EmulatedCluster(shards=len(self.result.oplogs))
        self._rest: list[list[Mapping[str, Any]]] = []

    def start(self) -> str:
        """Start the emulated cluster loaded up to the cut; return the mongos URI."""
        self.cluster.start()
        for shard, (_name, oplog) in zip(
            self.cluster.shards, sorted(self.result.oplogs.items()), strict=True
        ):
            for entry in oplog:
                if entry["ts"] <= self.cut:
                    shard.append(entry)
            shard.set_majority(shard.cluster_time())  # its newest entry, or its start
            self._rest.append([entry for entry in oplog if entry["ts"] > self.cut])
        self._load(self.state_at_cut, self.catalog)
        return self.cluster.uri

    def feed_rest(self) -> Timestamp:
        """Append the oplogs after the cut and a closing no-op; return the no-op's time."""
        if len(self._rest) != len(self.cluster.shards):
            raise RuntimeError("expected start() before feed_rest(), got no started cluster")
        for shard, rest in zip(self.cluster.shards, self._rest, strict=True):
            for entry in rest:
                shard.append(entry)
        end = self.cluster.noop_on_every_shard()
        self._load(self.result.final_state, self.final_catalog)
        self._rest = [[] for _ in self._rest]
        return end

    def stop(self) -> None:
        """Stop the emulated cluster."""
        self.cluster.stop()

    def __enter__(self) -> Self:
        """Start the cluster (:meth:`start`)."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the cluster."""
        self.stop()

    def _load(self, state: Mapping[Namespace, Mapping[bytes, Any]], catalog: Catalog) -> None:
        # Every collection lives on the primary shard, as the emulated mongos routes them;
        # find through mongos reads every shard, so this is what a copy sees.
        primary = self.cluster.shards[0]
        for ns, (options, indexes) in catalog.items():
            documents = list(state.get(ns, {}).values())
            primary.load_collection(f"{ns[0]}.{ns[1]}", documents, options=options, indexes=indexes)
