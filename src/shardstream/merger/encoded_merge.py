"""Layer 3, fast path: the merged stream of several shards whose events stay encoded.

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
-- an invalidate ends the whole stream -- is applied here.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from shardstream.transform.encoded_stream import EncodedBatch


def merge_encoded(shards: Iterable[Iterator[EncodedBatch]]) -> Iterator[list[bytes]]:
    """Merge the shards' encoded events; yield the merged events in batches.

    ``shards`` are in the order the shards were added (the tie-break of equal keys).
    Stops after the first invalidate in merged order.

    Complexity: O(n log s) per run of n events from s shards (timsort of s sorted runs),
    plus O(s log b) to cut batches of b events.
    """
    streams = list(shards)
    keys: list[list[bytes]] = [[] for _ in streams]
    events: list[list[bytes]] = [[] for _ in streams]
    positions = [0] * len(streams)
    invalidate_keys: dict[int, bytes] = {}  # by shard, once its invalidate's batch is read
    live = list(range(len(streams)))
    while True:
        # Every live shard needs unmerged events: its batch's last key bounds the others.
        for index in [i for i in live if positions[i] == len(keys[i])]:
            if _load(index, streams, keys, events, invalidate_keys):
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
            invalidate = invalidate_keys.get(index)
            if invalidate is not None:
                at = bisect_left(shard_keys, invalidate, start, cut)
                if at < cut and shard_keys[at] == invalidate:
                    invalidates.append(len(run_keys) + at - start)
            run_keys += shard_keys[start:cut]
            run_events += events[index][start:cut]
            positions[index] = cut
        order = sorted(range(len(run_keys)), key=run_keys.__getitem__)
        merged = [run_events[i] for i in order]
        if invalidates:
            # The stream ends with the first invalidate in merged order.
            yield merged[: min(order.index(i) for i in invalidates) + 1]
            return
        yield merged


def _load(
    index: int,
    streams: list[Iterator[EncodedBatch]],
    keys: list[list[bytes]],
    events: list[list[bytes]],
    invalidate_keys: dict[int, bytes],
) -> bool:
    """Move shard ``index`` to its next batch with events; False once it has ended."""
    for batch in streams[index]:
        if batch.invalidate_key is not None:
            invalidate_keys[index] = batch.invalidate_key
        if batch.keys:
            keys[index] = batch.keys
            events[index] = batch.events
            return True
    return False
