"""The merge of encoded events: (key, shard) order, batch boundaries and invalidates.

Seeded random shards (equal keys within and across shards, empty batches, batches
of one event, an invalidate on some shards) against the definition: every event
sorted by (key, shard index, position in its shard), cut after the first
invalidate.
"""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from shardstream.merger.raw.encoded_merge import merge_encoded, merge_encoded_batches
from shardstream.transform.raw.encoded_stream import EncodedBatch

Shard = list[EncodedBatch]


def _random_shards(rng: random.Random) -> list[Shard]:
    shards: list[Shard] = []
    for index in range(rng.randint(1, 5)):
        keys = sorted(b"%03d" % rng.randint(0, 60) for _ in range(rng.randint(0, 40)))
        events = [b"%d:%d:%s" % (index, n, key) for n, key in enumerate(keys)]
        invalidate = bool(keys) and rng.random() < 0.3
        batches: list[EncodedBatch] = []
        at = 0
        while at < len(keys) or not batches:
            size = rng.choice([0, 1, 2, 5, 17])
            batches.append(EncodedBatch(keys[at : at + size], events[at : at + size]))
            at += size
        if invalidate:  # its own key (an invalidate's token differs from its event's)
            last = batches[-1]
            key = keys[-1] + b"i"
            batches[-1] = EncodedBatch(
                [*last.keys, key], [*last.events, b"%d:invalidate" % index], invalidate_key=key
            )
        shards.append(batches)
    return shards


def _expected(shards: list[Shard]) -> list[bytes]:
    flat = []
    invalidate_of: dict[int, bytes] = {}
    for index, batches in enumerate(shards):
        keys = [key for batch in batches for key in batch.keys]
        events = [event for batch in batches for event in batch.events]
        for batch in batches:
            if batch.invalidate_key is not None:
                invalidate_of[index] = batch.invalidate_key
        flat += [
            (key, index, n, event) for n, (key, event) in enumerate(zip(keys, events, strict=True))
        ]
    out = []
    for key, index, _, event in sorted(flat):
        out.append(event)
        if invalidate_of.get(index) == key:
            break
    return out


@pytest.mark.parametrize("seed", range(300))
def test_random_shards_merge_by_key_then_shard(seed: int) -> None:
    shards = _random_shards(random.Random(seed))
    merged = [event for batch in merge_encoded(iter(s) for s in shards) for event in batch]
    assert merged == _expected(shards)


def test_no_shards_and_empty_shards_merge_to_nothing() -> None:
    assert list(merge_encoded([])) == []
    assert list(merge_encoded([iter([EncodedBatch([], [])]), iter([])])) == []


@pytest.mark.parametrize("seed", range(300))
def test_merging_merged_contiguous_blocks_is_merging_the_shards(seed: int) -> None:
    # What the worker processes do: each merges a block, the parent merges the blocks.
    rng = random.Random(seed)
    shards = _random_shards(rng)
    cut = sorted(rng.sample(range(1, len(shards) + 1), rng.randint(1, len(shards))))
    bounds = [0, *cut] if cut[-1] == len(shards) else [0, *cut, len(shards)]
    blocks = [
        list(merge_encoded_batches(iter(s) for s in shards[start:stop]))
        for start, stop in pairwise(bounds)
    ]
    merged = [event for batch in merge_encoded(iter(b) for b in blocks) for event in batch]
    assert merged == _expected(shards)


def test_an_invalidate_is_found_by_position_not_by_key() -> None:
    # Shard 1's invalidate has the key of an event of shard 0: in the block they make
    # together, the key comes twice, and only the last event is the invalidate.
    a = [EncodedBatch([b"1", b"5", b"7"], [b"a1", b"a5", b"a7"])]
    b = [EncodedBatch([b"2", b"5"], [b"b2", b"b-invalidate"], invalidate_key=b"5")]
    c = [EncodedBatch([b"3", b"6"], [b"c3", b"c6"])]
    block = list(merge_encoded_batches(iter(s) for s in (a, b)))
    assert block[-1].keys[-2:] == [b"5", b"5"]
    assert block[-1].invalidate_key == b"5"
    merged = [event for batch in merge_encoded([iter(block), iter(c)]) for event in batch]
    assert merged == [b"a1", b"b2", b"c3", b"a5", b"b-invalidate"]
