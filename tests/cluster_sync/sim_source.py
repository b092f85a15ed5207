"""A simulated sharded cluster served as a live sync source by the wire emulator.

The simulator's run is cut at a cluster time ``cut``: each emulated shard starts with its
oplog up to ``cut``, and the collections hold the cluster's contents at ``cut`` (options,
indexes, documents), which is what the sync's initial copy reads through mongos.  The
rest of the oplogs is appended once the sync has taken its T0 (:meth:`feed_rest`), with
a final no-op on every shard so the merge releases the last events, and the collections
then switch to the run's true final contents, which the target must end up equal to.

The contents at ``cut`` come from applying the shards' events up to ``cut``, sorted as the
merge orders them (the simulator keeps only its final state); the final comparison is
against the simulator's own ``final_state``, which no shardstream code produced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bson.timestamp import Timestamp

from shardstream.emulator import EmulatedCluster
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.sim.apply_events import apply_events
from shardstream.transform import ChangeStreamOptions
from tests.sim.replay import merged_events

Namespace = tuple[str, str]
# DDL events for the catalog, the oplog's raw diffs for apply_events.
EXPANDED = ChangeStreamOptions(show_expanded_events=True, show_raw_update_description=True)


def catalog_at(
    events: Sequence[Mapping[str, Any]],
) -> dict[Namespace, tuple[dict[str, Any], list[Any]]]:
    """Each namespace's ``create`` options and index specs after ``events``."""
    catalog: dict[Namespace, tuple[dict[str, Any], list[Any]]] = {}
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


class SimulatedSource:
    """The emulated source cluster for one simulated run, cut at a fraction of its stream."""

    def __init__(self, config: SimulationConfig, *, cut_fraction: float = 0.4) -> None:
        """Run the simulator and prepare the shards' oplogs and the contents at the cut."""
        self.result = SimulatedCluster(config).run()
        events = merged_events(self.result, EXPANDED)
        crud = [e for e in events if "documentKey" in e]
        self.cut: Timestamp = crud[int(len(crud) * cut_fraction)]["clusterTime"]
        before = [e for e in events if e["clusterTime"] <= self.cut]
        self.state_at_cut = apply_events(before)
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
            head = [entry for entry in oplog if entry["ts"] <= self.cut]
            for entry in head:
                shard.append(entry)
            shard.set_majority(shard.oplog.last_ts or Timestamp(1, 1))
            self._rest.append([entry for entry in oplog if entry["ts"] > self.cut])
        self._load(self.state_at_cut, self.catalog)
        return self.cluster.uri

    def _load(
        self,
        state: Mapping[Namespace, Mapping[bytes, Any]],
        catalog: Mapping[Namespace, tuple[dict[str, Any], list[Any]]],
    ) -> None:
        primary = self.cluster.shards[0]
        for ns, (options, indexes) in catalog.items():
            documents = list(state.get(ns, {}).values())
            primary.load_collection(f"{ns[0]}.{ns[1]}", documents, options=options, indexes=indexes)

    def feed_rest(self) -> Timestamp:
        """Append the oplogs after the cut and a closing no-op; return the no-op's time."""
        for shard, rest in zip(self.cluster.shards, self._rest, strict=True):
            for entry in rest:
                shard.append(entry)
        newest = max(shard.oplog.last_ts or Timestamp(1, 1) for shard in self.cluster.shards)
        end = Timestamp(newest.time + 1, 1)
        for shard in self.cluster.shards:
            shard.append({"op": "n", "ns": "", "o": {"msg": "periodic noop"}, "ts": end})
            shard.set_majority(end)
        self._load(self.result.final_state, self.final_catalog)
        return end

    def stop(self) -> None:
        """Stop the emulated cluster."""
        self.cluster.stop()
