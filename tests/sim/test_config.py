"""SimulationConfig and CollectionSpec refuse what the simulator cannot model."""

from __future__ import annotations

import dataclasses

import pytest

from shardstream.errors import ConfigurationError
from shardstream.sim import DEFAULT_COLLECTIONS, CollectionSpec, SimulationConfig


def test_defaults_name_the_shards_and_collections():
    config = SimulationConfig()
    assert config.shard_names == ("shard0", "shard1", "shard2")
    assert config.added_shard is None
    assert config.all_shard_names == config.shard_names
    assert config.collections == DEFAULT_COLLECTIONS
    assert [spec.sharded for spec in DEFAULT_COLLECTIONS] == [True, True, False]
    assert SimulationConfig(add_shard_at=5).all_shard_names[-1] == "shard3"
    assert SimulationConfig(operations=100, idle_window=(0.1, 0.5)).idle_steps() == range(10, 50)


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SimulationConfig().seed = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "changes",
    [
        {"shards": 0},
        {"shards": True},
        {"operations": -1},
        {"database": ""},
        {"database": "a.b"},
        {"database": "admin"},
        {"collections": ()},
        {"collections": (CollectionSpec(name="a"), CollectionSpec(name="a"))},
        {"p_insert": -0.1},
        {"p_update": float("nan")},
        {
            "p_insert": 0,
            "p_update": 0,
            "p_replace": 0,
            "p_delete": 0,
            "p_transaction": 0,
            "p_migration": 0,
        },
        {"multi_shard_fraction": 1.5},
        {"collmod_at": 2},
        {"noop_interval_secs": 0},
        {"max_step_ms": 0},
        {"idle_shards": ("shard9",)},
        {"idle_shards": ["shard1"]},
        {"idle_shards": ("shard0", "shard1", "shard2")},
        {"idle_window": (0.8, 0.2)},
        {"idle_window": (0, 1, 2)},
        {"add_shard_at": 5000},
        {"chunks_per_collection": 0},
    ],
)
def test_bad_configs_are_refused(changes):
    with pytest.raises(ConfigurationError):
        SimulationConfig(**changes)


def test_the_added_shard_may_be_idle():
    config = SimulationConfig(add_shard_at=10, idle_shards=("shard3",))
    assert config.idle_shards == ("shard3",)


@pytest.mark.parametrize(
    "changes",
    [
        {"name": ""},
        {"name": "a$b"},
        {"name": "system.views"},
        {"name": "c", "hashed": True},
        {"name": "c", "shard_key": ("_id",)},
        {"name": "c", "shard_key": ("_id", "a"), "hashed": True},
        {"name": "c", "shard_key": ("a", "b")},
        {"name": "c", "shard_key": ("a.b",)},
        {"name": "c", "shard_key": ["a"]},
    ],
)
def test_bad_collection_specs_are_refused(changes):
    with pytest.raises(ConfigurationError):
        CollectionSpec(**changes)


def test_hashed_id_and_compound_keys_are_accepted():
    assert CollectionSpec(name="c", shard_key=("_id",), hashed=True).sharded
    assert CollectionSpec(name="c", shard_key=("a", "_id")).sharded
    assert not CollectionSpec(name="c").sharded
