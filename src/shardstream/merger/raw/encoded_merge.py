"""Fast path: the merged stream of several shards whose events stay encoded.

For a replay of oplog files every shard is read to its end, so the gate of the
:class:`AsyncResultsMerger` only decides *when* an event is released, never the
order: each shard's events arrive in increasing token order and the merge returns
them by ``(token _data, shard index)``, exactly as the heap of the merger does.
Here the events are ``(sort key, BSON bytes)`` pairs that are never decoded.

Rather than a heap step per event (a tuple, a ``heapreplace`` and a dozen
interpreter operations), the merge works a run at a time: the smallest
``(last key, shard)`` among the shards' current batches bounds what may go out, each
shard's events up to that bound are cut with ``bisect``, and the cut runs are put in
order by one stable ``sorted`` over their keys (timsort merges the already sorted
runs; stability keeps the shard order on equal keys and each shard's own order).

The router's per-event stages commute with the merge and run on each shard
(:class:`FastShardPipeline` with ``single_shard=False``); the one rule that does not
-- an invalidate ends the whole stream -- is applied here.  An invalidate is a shard's
last event, so it is found by position: in a stream that is itself a merge (a block of
shards merged by a worker process) its key may also be another shard's event's.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from shardstream.transform.raw.encoded_stream import EncodedBatch


def merge_encoded(shards: Iterable[Iterator[EncodedBatch]]) -> Iterator[list[bytes]]:
    """Merge the shards' encoded events; yield the merged events in batches.

    ``shards`` are in the order the shards were added (the tie-break of equal keys).
    Stops after the first invalidate in merged order.

    Complexity: O(n log s) per run of n events from s shards (timsort of s sorted runs),
    plus O(s log b) to cut batches of b events.
    """
    for batch in _merge(shards, with_keys=False):
        yield batch.events


def merge_encoded_batches(shards: Iterable[Iterator[EncodedBatch]]) -> Iterator[EncodedBatch]:
    """:func:`merge_encoded` with each event's key kept: a merged stream that merges again.

    A worker process merges a contiguous block of shards with this; the parent then merges
    the blocks in shard order, which gives the same (key, shard) order as one merge of all
    the shards.  If the stream ends at an invalidate, its last batch carries the
    invalidate's key, as :func:`encode_shard` marks a shard's invalidate.
    """
    return _merge(shards, with_keys=True)


def _merge(shards: Iterable[Iterator[EncodedBatch]], *, with_keys: bool) -> Iterator[EncodedBatch]:
    streams = list(shards)
    keys: list[list[bytes]] = [[] for _ in streams]
    events: list[list[bytes]] = [[] for _ in streams]
    positions = [0] * len(streams)
    # Shards whose current batch ends with their invalidate (an invalidate is always the
    # last event of its shard): found by position, as its key may equal another event's.
    ending = set[int]()
    live = list(range(len(streams)))
    while True:
        # Every live shard needs unmerged events: its batch's last key bounds the others.
        for index in [i for i in live if positions[i] == len(keys[i])]:
            if _load(index, streams, keys, events, ending):
                positions[index] = 0
            else:
                live.remove(index)
        if not live:
            return
        # No live shard can later send anything below (its last key, its index).
        bound, bound_index = min((keys[i][-1], i) for i in live)
        run_keys: list[bytes] = []
        run_events: list[bytes] = []
        invalidates: list[int] = []  # indices in the run
        for index in live:
            shard_keys = keys[index]
            start = positions[index]
            # Equal keys: a shard before bound_index goes first, so its bound-key events
            # may go out; a shard after it must wait for bound_index's next batch.
            cut = (bisect_right if index <= bound_index else bisect_left)(shard_keys, bound, start)
            if cut == start:
                continue
            if index in ending and cut == len(shard_keys):
                invalidates.append(len(run_keys) + cut - 1 - start)
            run_keys += shard_keys[start:cut]
            run_events += events[index][start:cut]
            positions[index] = cut
        order = sorted(range(len(run_keys)), key=run_keys.__getitem__)
        merged = [run_events[i] for i in order]
        merged_keys = [run_keys[i] for i in order] if with_keys else []
        if invalidates:
            # The stream ends with the first invalidate in merged order.
            end = min(order.index(i) for i in invalidates) + 1
            yield EncodedBatch(merged_keys[:end], merged[:end], run_keys[order[end - 1]])
            return
        yield EncodedBatch(merged_keys, merged)


def _load(
    index: int,
    streams: list[Iterator[EncodedBatch]],
    keys: list[list[bytes]],
    events: list[list[bytes]],
    ending: set[int],
) -> bool:
    """Move shard ``index`` to its next batch with events; False once it has ended."""
    for batch in streams[index]:
        if batch.keys:
            keys[index] = batch.keys
            events[index] = batch.events
            if batch.invalidate_key is not None:
                ending.add(index)
            return True
    return False
