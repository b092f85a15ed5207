"""The simulator's building blocks: clock, chunks, documents and diffs."""

from __future__ import annotations

import random

import pytest
from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import ConfigurationError
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.sim.chunks import REGIONS, ChunkMap, KeyBag, hashed_bounds, range_bounds
from shardstream.sim.clock import HybridClock
from shardstream.sim.config import CollectionSpec
from shardstream.sim.documents import new_document, random_diff
from shardstream.transform.update.apply_update import apply_update
from shardstream.transform.update.update_description import parse_update_diff


def test_clock_ticks_within_a_second_and_follows_the_wall():
    clock = HybridClock(Timestamp(100, 0))
    assert [clock.tick(100), clock.tick(99), clock.tick(101)] == [
        Timestamp(100, 1),
        Timestamp(100, 2),
        Timestamp(101, 1),
    ]
    assert clock.peek(101) == Timestamp(101, 2)
    assert clock.last == Timestamp(101, 1)


def test_clock_observes_messages_and_takes_agreed_timestamps():
    clock = HybridClock()
    clock.tick(50)
    clock.observe(Timestamp(50, 9))
    clock.observe(Timestamp(10, 1))  # an older message changes nothing
    assert clock.tick(50) == Timestamp(50, 10)
    clock.take(Timestamp(60, 3))
    assert clock.tick(60) == Timestamp(60, 4)
    with pytest.raises(ConfigurationError):
        clock.take(Timestamp(60, 4))


def test_clock_borrows_the_next_second_when_increments_run_out():
    clock = HybridClock(Timestamp(5, 2**32 - 1))
    assert clock.tick(5) == Timestamp(6, 1)


def test_key_bag_picks_deterministically_and_removes():
    bag = KeyBag()
    for key in (b"a", b"b", b"c", b"a"):
        bag.add(key)
    assert len(bag) == 3
    assert b"b" in bag
    bag.remove(b"a")
    assert sorted(bag) == [b"b", b"c"]
    picks = [bag.pick(random.Random(1)) for _ in range(3)]
    assert len(set(picks)) == 1


def test_chunk_maps_route_positions():
    bounds = range_bounds(4)
    assert bounds == ["ca-central", "eu-west", "sa-east"]
    chunks = ChunkMap(bounds, "shard0")
    assert len(chunks.chunks) == 4
    assert chunks.chunk_at("af-south") is chunks.chunks[0]
    assert chunks.chunk_at("eu-west") is chunks.chunks[2]
    assert chunks.chunk_at("us-west") is chunks.chunks[3]
    assert all(any(c.contains(region) for c in chunks.chunks) for region in REGIONS)
    assert len(hashed_bounds(6)) == 5
    assert hashed_bounds(2) == [0]
    with pytest.raises(ConfigurationError):
        ChunkMap([3, 1], "shard0")


def test_hashed_id_collections_run():
    spec = CollectionSpec(name="events", shard_key=("_id",), hashed=True)
    config = SimulationConfig(seed=9, operations=300, collections=(spec,))
    result = SimulatedCluster(config).run()
    docs = result.final_state[("shop", "events")]
    assert docs
    assert len(result.chunk_owners["shop.events"]) == config.chunks_per_collection
    assert len({owner for _, _, owner in result.chunk_owners["shop.events"]}) > 1


@given(st.integers(0, 2**32), st.integers(0, 8))
def test_random_diffs_are_valid_and_spare_protected_fields(seed, rounds):
    rng = random.Random(seed)
    document = new_document(rng, {"_id": 1, "region": "eu-west"})
    for _ in range(rounds + 1):
        diff = random_diff(rng, document, ("_id", "region"), 0.5)
        assert list(diff)[: len([k for k in diff if len(k) == 1])] == [
            k for k in ("d", "u", "i") if k in diff
        ]
        parse_update_diff(diff, with_disambiguated_paths=True)
        updated = apply_update(document, {"$v": 2, "diff": diff})
        assert list(updated)[:2] == ["_id", "region"]
        assert updated["region"] == "eu-west"
        assert updated != document
        document = updated
