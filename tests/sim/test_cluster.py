"""The simulated cluster's oplogs: clocks, transactions, migrations, topology."""

from __future__ import annotations

import datetime
import itertools
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.sim import SimulatedCluster, SimulationConfig, SimulationResult
from tests.sim.replay import in_range, position

NULL_TS = Timestamp(0, 0)


def crud_ops(entry: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The CRUD operations an entry carries: itself, or the ops of its applyOps."""
    if entry["op"] in ("i", "u", "d"):
        yield entry
    elif entry["op"] == "c" and "applyOps" in entry["o"]:
        yield from entry["o"]["applyOps"]


def document_key(op: Mapping[str, Any]) -> Mapping[str, Any]:
    key: Mapping[str, Any] = op["o"] if op["op"] == "d" else op["o2"]
    return key


def test_the_same_config_writes_byte_identical_oplogs(tmp_path):
    config = SimulationConfig(seed=3, operations=400, add_shard_at=200, idle_shards=("shard1",))
    first = SimulatedCluster(config).run().write_oplogs(tmp_path / "a")
    second = SimulatedCluster(config).run().write_oplogs(tmp_path / "b")
    assert sorted(first) == ["shard0", "shard1", "shard2", "shard3"]
    for shard, path in first.items():
        assert path.name == f"{shard}.oplog.bson"
        assert path.read_bytes() == second[shard].read_bytes()
    other = SimulatedCluster(SimulationConfig(seed=4, operations=400)).run()
    other_paths = other.write_oplogs(tmp_path / "c")
    assert other_paths["shard0"].read_bytes() != first["shard0"].read_bytes()


def test_each_shard_timestamps_strictly_increase(busy: SimulationResult):
    for shard, oplog in busy.oplogs.items():
        stamps = [entry["ts"] for entry in oplog]
        assert all(a < b for a, b in itertools.pairwise(stamps)), shard
        assert stamps[0] > busy.shard_added[shard]


def test_equal_timestamps_occur_across_shards(busy: SimulationResult):
    by_shard = {shard: {entry["ts"] for entry in oplog} for shard, oplog in busy.oplogs.items()}
    shared = set.intersection(by_shard["shard0"], by_shard["shard1"])
    assert len(shared) > 50
    assert busy.counters.equal_timestamps >= len(shared)


def test_every_entry_has_optime_fields_and_crud_has_ui_and_document_key(busy: SimulationResult):
    key_order = {"shop.orders": ["region", "_id"], "shop.users": ["uid", "_id"]}
    for oplog in busy.oplogs.values():
        for entry in oplog:
            assert entry["t"] == Int64(1)
            assert isinstance(entry["t"], Int64)
            assert entry["v"] == Int64(2)
            wall = entry["wall"]
            assert wall == datetime.datetime.fromtimestamp(entry["ts"].time, tz=datetime.UTC)
            for op in crud_ops(entry):
                ui = op["ui"]
                assert isinstance(ui, Binary)
                assert ui.subtype == 4
                assert ui == busy.collection_uuids[op["ns"]]
                key = document_key(op)
                assert list(key) == key_order.get(op["ns"], ["_id"])
                if op["op"] == "d":
                    assert "o2" not in op
                elif op["op"] == "i" or "_id" in op["o"]:
                    assert all(op["o"][name] == value for name, value in key.items())
                    assert next(iter(op["o"])) == "_id"
                else:
                    assert list(op["o"]) == ["$v", "diff"]


def test_multi_shard_commits_share_one_timestamp(busy: SimulationResult):
    commits: dict[tuple[bytes, int], dict[str, Timestamp]] = defaultdict(dict)
    for shard, oplog in busy.oplogs.items():
        by_ts = {entry["ts"]: entry for entry in oplog}
        for entry in oplog:
            if entry["op"] != "c" or "commitTransaction" not in entry["o"]:
                continue
            assert entry["o"]["commitTimestamp"] == entry["ts"]
            prepare = by_ts[entry["prevOpTime"]["ts"]]
            assert prepare["o"].get("prepare") is True
            assert prepare["lsid"] == entry["lsid"]
            assert prepare["txnNumber"] == entry["txnNumber"]
            commits[(entry["lsid"]["id"], entry["txnNumber"])][shard] = entry["ts"]
    assert len(commits) == busy.counters.multi_shard_transactions > 10
    for participants in commits.values():
        assert len(participants) >= 2
        assert len(set(participants.values())) == 1


def test_transaction_chains_link_back_to_a_null_optime(busy: SimulationResult):
    partial_chains = 0
    for oplog in busy.oplogs.values():
        by_ts = {entry["ts"]: entry for entry in oplog}
        for entry in oplog:
            if entry["op"] != "c" or "applyOps" not in entry["o"] or entry["o"].get("partialTxn"):
                continue
            length, link = 1, entry
            while link["prevOpTime"]["ts"] != NULL_TS:
                link = by_ts[link["prevOpTime"]["ts"]]
                assert link["o"]["partialTxn"] is True
                assert link["lsid"] == entry["lsid"]
                length += 1
            assert link["prevOpTime"]["t"] == Int64(-1)
            partial_chains += length > 1
    assert partial_chains >= busy.counters.large_transactions // 2 > 0


def test_migrations_copy_to_the_recipient_then_delete_on_the_donor(busy: SimulationResult):
    assert busy.counters.migrations == len(busy.migrations) > 20
    moved = [record for record in busy.migrations if record.document_keys]
    assert len(moved) > 10
    for record in moved:
        copies = [
            entry["o2"]
            for entry in busy.oplogs[record.recipient]
            if entry.get("fromMigrate") and entry["op"] == "i" and entry["ns"] == record.ns
        ]
        cleanup = [
            entry
            for entry in busy.oplogs[record.donor]
            if entry.get("fromMigrate") and entry["op"] == "d" and entry["ns"] == record.ns
        ]
        deleted = [entry["o"] for entry in cleanup if entry["ts"] > record.commit_ts]
        for key in record.document_keys:
            assert key in copies
            assert key in deleted


def test_every_write_goes_to_the_owner_of_its_chunk(busy: SimulationResult):
    history: dict[tuple[str, Any], list[tuple[Timestamp, str]]] = defaultdict(list)
    for record in busy.migrations:
        history[(record.ns, record.lower)].append((record.commit_ts, record.recipient))
    checked = 0
    for shard, oplog in busy.oplogs.items():
        for entry in oplog:
            if entry.get("fromMigrate"):
                continue
            for op in crud_ops(entry):
                if op["ns"] not in busy.chunk_owners:
                    continue
                where = position(busy, op["ns"], document_key(op))
                (lower,) = [
                    lo for lo, hi, _ in busy.chunk_owners[op["ns"]] if in_range(where, lo, hi)
                ]
                owner = "shard0"
                for commit_ts, recipient in history[(op["ns"], lower)]:
                    if commit_ts < entry["ts"]:
                        owner = recipient
                assert owner == shard
                checked += 1
    assert checked > 1000


def test_first_chunk_on_a_shard_is_announced_by_the_donor(busy: SimulationResult):
    announced = []
    for shard, oplog in busy.oplogs.items():
        for entry in oplog:
            o2 = entry.get("o2") or {}
            if entry["op"] == "n" and "migrateChunkToNewShard" in o2:
                assert o2["fromShardId"] == shard
                assert entry["ns"] == o2["migrateChunkToNewShard"]
                assert entry["ui"] == busy.collection_uuids[entry["ns"]]
                announced.append((entry["ns"], o2["toShardId"]))
    # Every sharded collection reaches shard1, shard2 (first balancing) and shard3 (added).
    for ns in busy.chunk_owners:
        for shard in ("shard1", "shard2"):
            assert (ns, shard) in announced
    assert any(recipient == "shard3" for _, recipient in announced)


def test_a_shard_added_mid_run_starts_then_and_receives_chunks(busy: SimulationResult):
    added = busy.shard_added["shard3"]
    assert all(busy.shard_added[s] < added for s in ("shard0", "shard1", "shard2"))
    oplog = busy.oplogs["shard3"]
    assert oplog[0]["o"] == {"msg": "initiating set"}
    assert oplog[0]["ts"] > added
    earlier = [e for s in ("shard0", "shard1") for e in busy.oplogs[s] if e["ts"] <= added]
    assert earlier
    assert any(record.recipient == "shard3" for record in busy.migrations)
    own_writes = [e for e in oplog if e["op"] in ("i", "u", "d") and not e.get("fromMigrate")]
    assert len(own_writes) > 20


def test_an_idle_shard_writes_only_periodic_noops_for_a_long_stretch(busy: SimulationResult):
    oplog = busy.oplogs["shard2"]
    interval = busy.config.noop_interval_secs
    longest: list[Mapping[str, Any]] = []
    run: list[Mapping[str, Any]] = []
    for entry in oplog:
        if entry["op"] == "n" and entry["o"] == {"msg": "periodic noop"}:
            run.append(entry)
            longest = max(longest, run, key=len)
        else:
            run = []
    span = longest[-1]["ts"].time - longest[0]["ts"].time
    whole = oplog[-1]["ts"].time - oplog[0]["ts"].time
    assert span > 0.4 * whole
    gaps = [b["ts"].time - a["ts"].time for a, b in itertools.pairwise(longest)]
    assert all(interval - 1 <= gap <= interval + 1 for gap in gaps)


def test_ddl_creates_on_the_primary_and_modifies_on_every_owner(busy: SimulationResult):
    initiating, first = busy.oplogs["shard0"][:2]
    assert initiating["o"] == {"msg": "initiating set"}
    assert first["op"] == "c"
    assert first["o"]["create"] == "orders"
    assert "fromMigrate" not in first
    creates = [
        (shard, entry.get("fromMigrate", False))
        for shard, oplog in busy.oplogs.items()
        for entry in oplog
        if entry["op"] == "c" and "create" in entry["o"]
    ]
    assert [s for s, fm in creates if not fm] == ["shard0"] * len(busy.config.collections)
    assert {s for s, fm in creates if fm} == {"shard1", "shard2", "shard3"}
    modifies = [
        entry for oplog in busy.oplogs.values() for entry in oplog if "collMod" in entry["o"]
    ]
    assert len(modifies) == busy.counters.collmods >= len(busy.config.collections)


def test_counters_add_up(busy: SimulationResult):
    counters = busy.counters
    assert counters.entries == {shard: len(oplog) for shard, oplog in busy.oplogs.items()}
    assert counters.transactions > counters.multi_shard_transactions > 0
    assert counters.periodic_noops > 10
    assert counters.migrated_documents == sum(len(r.document_keys) for r in busy.migrations)


@pytest.mark.parametrize("shards", [1, 2])
def test_small_clusters_run(shards: int):
    result = SimulatedCluster(SimulationConfig(shards=shards, operations=200, seed=5)).run()
    assert sorted(result.oplogs) == [f"shard{i}" for i in range(shards)]
    assert sum(len(docs) for docs in result.final_state.values()) > 0
    if shards == 1:
        assert result.counters.multi_shard_transactions == 0
        assert result.counters.migrations == 0
