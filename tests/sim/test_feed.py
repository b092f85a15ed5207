"""Live-feeding sources over simulated oplogs keep the OplogSource contract."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Any

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, OplogError
from shardstream.oplog.source import OplogBatch, OplogSource
from shardstream.sim import SimulatedOplogSource, SimulationResult, simulated_sources


def drain(
    source: OplogSource, rng: random.Random, limits: list[int] | None = None
) -> list[OplogBatch | None]:
    """Read ``source`` to exhaustion with random limits; return every answer."""
    answers: list[OplogBatch | None] = []
    while True:
        limit = rng.randint(0, 40)
        batch = source.next_batch(limit)
        answers.append(batch)
        if limits is not None:
            limits.append(limit)
        if batch is not None and batch.exhausted:
            return answers


def test_batches_keep_the_source_contract(busy: SimulationResult):
    sources = simulated_sources(busy, seed=11, max_batch=12, delay=0.3)
    assert sorted(sources) == sorted(busy.oplogs)
    rng = random.Random(0)
    for name, source in sources.items():
        assert source.name == name
        limits: list[int] = []
        answers = drain(source, rng, limits)
        promise: Timestamp | None = None
        seen: list[Mapping[str, Any]] = []
        for limit, batch in zip(limits, answers, strict=True):
            if batch is None:
                continue
            assert len(batch.entries) <= min(limit, 12)
            stamps = [entry["ts"] for entry in batch.entries]
            assert all(a < b for a, b in itertools.pairwise(stamps))
            if promise is not None:
                assert batch.promise is not None
                assert batch.promise >= promise
                assert all(ts > promise for ts in stamps)
            if stamps:
                assert batch.promise == stamps[-1]
            promise = batch.promise
            seen.extend(batch.entries)
        assert seen == list(busy.oplogs[name])
        assert promise == busy.oplogs[name][-1]["ts"]
        assert None in answers
        assert any(a is not None and not a.entries and not a.exhausted for a in answers)


def test_empty_batches_may_promise_just_below_the_next_entry(busy: SimulationResult):
    oplog = busy.oplogs["shard0"]
    source = SimulatedOplogSource("shard0", oplog, seed=2, max_batch=3, delay=0.0)
    stamps = {entry["ts"] for entry in oplog}
    reported = []
    while (batch := source.next_batch(3)) is not None and not batch.exhausted:
        if not batch.entries and batch.promise is not None and batch.promise not in stamps:
            reported.append(batch.promise)
    assert reported


def test_the_same_seed_gives_the_same_batches(busy: SimulationResult):
    def shape(seed: int) -> list[object]:
        source = simulated_sources(busy, seed=seed)["shard1"]
        return [
            None if answer is None else (len(answer.entries), answer.promise)
            for answer in drain(source, random.Random(5))
        ]

    assert shape(1) == shape(1)
    assert shape(1) != shape(2)


def test_an_added_shard_source_starts_after_it_joined(busy: SimulationResult):
    source = simulated_sources(busy, seed=3, delay=0.0)["shard3"]
    answers = [a for a in drain(source, random.Random(1)) if a is not None]
    first = next(entry for answer in answers for entry in answer.entries)
    assert first["ts"] > busy.shard_added["shard3"]
    assert all(a.promise is None or a.promise >= busy.shard_added["shard3"] for a in answers)


def test_fetch_entry_and_close(busy: SimulationResult):
    oplog = busy.oplogs["shard1"]
    source = SimulatedOplogSource("shard1", oplog, seed=0)
    assert source.fetch_entry(oplog[10]["ts"]) is oplog[10]
    assert source.fetch_entry(Timestamp(1, 1)) is None
    source.close()
    with pytest.raises(OplogError, match="closed"):
        source.next_batch(5)


def test_an_exhausted_source_stays_exhausted():
    source = SimulatedOplogSource("s", [], seed=0)
    for _ in range(3):
        batch = source.next_batch(4)
        assert batch == OplogBatch((), None, exhausted=True)


@pytest.mark.parametrize(
    ("max_batch", "delay"), [(0, 0.1), (True, 0.1), (4, 1.0), (4, -0.1), (4, "x")]
)
def test_bad_feed_settings_are_refused(max_batch, delay):
    with pytest.raises(ConfigurationError):
        SimulatedOplogSource("s", [], seed=0, max_batch=max_batch, delay=delay)


def test_a_negative_limit_is_refused():
    with pytest.raises(ConfigurationError):
        SimulatedOplogSource("s", [], seed=0).next_batch(-1)
