"""Layer 3, fast path: the merged stream of several shards whose events stay encoded.

For a replay of oplog files every shard is read to its end, so the gate of the
:class:`AsyncResultsMerger` only decides *when* an event is released, never the
order: each shard's events arrive in increasing token order and the merge returns
them by ``(token _data, shard index)``, exactly as the heap of the merger does.
Here the events are ``(sort key, BSON bytes)`` pairs that are never decoded, and
the merge is ``heapq.merge`` over each shard's batches.

The router's per-event stages commute with the merge and run on each shard
(:class:`FastShardPipeline` with ``single_shard=False``); the one rule that does not
-- an invalidate ends the whole stream -- is applied here.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from itertools import repeat

from shardstream.transform.encoded_stream import EncodedBatch


def merge_encoded(shards: Iterable[Iterator[EncodedBatch]]) -> Iterator[list[bytes]]:
    """Merge the shards' encoded events; yield the merged events in batches.

    ``shards`` are in the order the shards were added (the tie-break of equal keys).
    Stops after the first invalidate in merged order.

    Complexity: O(log s) per event for s shards.
    """
    invalidates: dict[int, bytes] = {}
    streams = [_keyed(index, batches, invalidates) for index, batches in enumerate(shards)]
    out: list[bytes] = []
    for key, index, event in heapq.merge(*streams):
        out.append(event)
        if invalidates and invalidates.get(index) == key:
            break
        if len(out) >= 1000:
            yield out
            out = []
    if out:
        yield out


def _keyed(
    index: int, batches: Iterator[EncodedBatch], invalidates: dict[int, bytes]
) -> Iterator[tuple[bytes, int, bytes]]:
    for batch in batches:
        if batch.invalidate_key is not None:
            invalidates[index] = batch.invalidate_key
        yield from zip(batch.keys, repeat(index), batch.events, strict=False)
