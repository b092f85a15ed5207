"""Simulated oplogs go through the transform, and their events rebuild the true state."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.oplog import read_oplog_file
from shardstream.sim import SimulatedCluster, SimulationConfig, SimulationResult, id_key
from shardstream.transform import ChangeStreamOptions
from tests.sim.replay import (
    RAW,
    apply_events,
    encoded,
    in_range,
    merged_events,
    position,
    shard_events,
)


@pytest.mark.parametrize(
    "options",
    [ChangeStreamOptions(), ChangeStreamOptions(show_expanded_events=True)],
    ids=["classic", "expanded"],
)
def test_every_shard_oplog_transforms(busy: SimulationResult, options: ChangeStreamOptions):
    kinds: Counter[str] = Counter()
    for oplog in busy.oplogs.values():
        kinds.update(event["operationType"] for event in shard_events(oplog, options))
    assert {"insert", "update", "replace", "delete"} <= set(kinds)
    expanded = {"create", "createIndexes", "modify", "shardCollection"}
    if options.show_expanded_events:
        assert expanded <= set(kinds)
        assert kinds["create"] == len(busy.config.collections)  # the recipients' are fromMigrate
        assert kinds["modify"] == busy.counters.collmods
    else:
        assert not expanded & set(kinds)


def test_final_state_is_the_merged_replay(busy: SimulationResult):
    replayed = apply_events(merged_events(busy))
    assert encoded(replayed) == encoded(busy.final_state)
    assert all(len(docs) > 50 for docs in busy.final_state.values())


def test_each_shard_keeps_its_unsharded_documents(busy: SimulationResult):
    unsharded = [s.name for s in busy.config.collections if not s.sharded]
    assert unsharded
    for shard, oplog in busy.oplogs.items():
        # Sharded collections are left out: a shard's own events miss the copies it got
        # by migration, so its later updates of them have nothing to apply to.
        events = [e for e in shard_events(oplog) if e.get("ns", {}).get("coll") in unsharded]
        state = apply_events(events)
        for name in unsharded:
            ns = (busy.config.database, name)
            expected = busy.final_state[ns] if shard == "shard0" else {}
            assert encoded({ns: state.get(ns, {})}) == encoded({ns: expected})


def test_each_shard_holds_what_it_owns_once_migrations_are_shown(busy: SimulationResult):
    options = RAW.with_options(show_migration_events=True)
    db = busy.config.database
    for shard, oplog in busy.oplogs.items():
        physical = apply_events(shard_events(oplog, options))
        expected = {}
        for (_, name), docs in busy.final_state.items():
            ns = f"{db}.{name}"
            if ns not in busy.chunk_owners:
                owned = docs if shard == "shard0" else {}
            else:
                chunks = busy.chunk_owners[ns]
                owned = {
                    key: doc
                    for key, doc in docs.items()
                    if any(
                        owner == shard and in_range(position(busy, ns, doc), lo, hi)
                        for lo, hi, owner in chunks
                    )
                }
            expected[(db, name)] = owned
        assert encoded(physical) == encoded(expected), shard


def test_oplog_files_read_back_as_written(busy: SimulationResult, tmp_path):
    paths = busy.write_oplogs(tmp_path)
    for shard, path in paths.items():
        assert list(read_oplog_file(str(path))) == list(busy.oplogs[shard])


@settings(max_examples=20)
@given(
    seed=st.integers(0, 2**32),
    shards=st.integers(1, 4),
    operations=st.integers(0, 150),
    add_shard=st.booleans(),
    idle=st.booleans(),
)
def test_any_run_replays_to_its_final_state(seed, shards, operations, add_shard, idle):
    config = SimulationConfig(
        seed=seed,
        shards=shards,
        operations=operations,
        add_shard_at=operations // 3 if add_shard else None,
        idle_shards=("shard0",) if idle and shards > 1 else (),
        max_pending_steps=3,
    )
    result = SimulatedCluster(config).run()
    assert encoded(apply_events(merged_events(result))) == encoded(result.final_state)
    keys = [key for docs in result.final_state.values() for key in docs]
    assert len(keys) == len(set(keys)) or len(result.final_state) > 1
    for (_, _), docs in result.final_state.items():
        for key, doc in docs.items():
            assert key == id_key(doc["_id"])
