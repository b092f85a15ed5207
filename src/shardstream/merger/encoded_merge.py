"""Layer 3, fast path: the merged stream of several shards whose events stay encoded.

For a replay of oplog files every shard is read to its end, so the gate of the
:class:`AsyncResultsMerger` only decides *when* an event is released, never the
order: each shard's events arrive in increasing token order and the merge returns
them by ``(token _data, shard index)``, exactly as the heap of the merger does.
Here the events are ``(sort key, BSON bytes)`` pairs that are never decoded, merged
with a heap of the shards' next keys.

The router's per-event stages commute with the merge and run on each shard
(:class:`FastShardPipeline` with ``single_shard=False``); the one rule that does not
-- an invalidate ends the whole stream -- is applied here.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from shardstream.transform.encoded_stream import EncodedBatch


def merge_encoded(shards: Iterable[Iterator[EncodedBatch]]) -> Iterator[list[bytes]]:
    """Merge the shards' encoded events; yield the merged events in batches.

    ``shards`` are in the order the shards were added (the tie-break of equal keys).
    Stops after the first invalidate in merged order.

    Complexity: O(log s) per event for s shards.
    """
    streams = list(shards)
    # Per shard: the batch being merged (keys, events) and the position in it; the heap
    # holds (next key, shard) -- one small tuple per event, no generator in between.
    keys: list[list[bytes]] = [[] for _ in streams]
    events: list[list[bytes]] = [[] for _ in streams]
    positions = [0] * len(streams)
    invalidates: dict[int, bytes] = {}
    heap: list[tuple[bytes, int]] = []
    for index in range(len(streams)):
        if _load(index, streams, keys, events, invalidates):
            heap.append((keys[index][0], index))
    heapq.heapify(heap)
    out: list[bytes] = []
    append = out.append
    replace = heapq.heapreplace
    while heap:
        key, index = heap[0]
        position = positions[index]
        append(events[index][position])
        if invalidates and invalidates.get(index) == key:
            break
        position += 1
        shard_keys = keys[index]
        if position < len(shard_keys):
            positions[index] = position
            replace(heap, (shard_keys[position], index))
        else:
            positions[index] = 0
            if _load(index, streams, keys, events, invalidates):
                replace(heap, (keys[index][0], index))
            else:
                heapq.heappop(heap)
        if len(out) >= 1000:
            yield out
            out = []
            append = out.append
    if out:
        yield out


def _load(
    index: int,
    streams: list[Iterator[EncodedBatch]],
    keys: list[list[bytes]],
    events: list[list[bytes]],
    invalidates: dict[int, bytes],
) -> bool:
    """Move shard ``index`` to its next batch with events; False once it has ended."""
    for batch in streams[index]:
        if batch.invalidate_key is not None:
            invalidates[index] = batch.invalidate_key
        if batch.keys:
            keys[index] = batch.keys
            events[index] = batch.events
            return True
    return False
