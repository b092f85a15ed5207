"""Sync: a batch of planned writes cut into the steps the applier runs in order.

A DDL event is a barrier: everything before it is acknowledged, then it runs alone, and
the writes between two barriers form one segment, which the writer lanes run in parallel
(:mod:`~shardstream.cluster_sync.writer_lanes`).  A source transaction's writes are one
item of a segment (applied as one target transaction) unless ``transactions`` is off.  A
DDL event inside a transaction (the ``create`` of a collection its first insert makes)
becomes a barrier ahead of the transaction's writes instead of cutting them in two:
creating the collection a moment early is invisible, splitting the transaction is not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange, transaction_of
from shardstream.cluster_sync.writer_lanes import SegmentItem


@dataclasses.dataclass(frozen=True, slots=True)
class Barrier:
    """A DDL event to apply alone.

    Attributes:
        ddl: the event.
        before: the token of the last write before it (None: none in this batch).
        floor: ``before`` may be checkpointed only if it sorts below this token: the
            event's own, or for one inside a transaction the transaction's first (the
            item before a regrouped transaction can sort after some of its events).
        settles: whether a checkpoint may follow it at its own token; not inside a
            transaction, whose writes (before and after it) are not applied yet.
    """

    ddl: DdlChange
    before: Mapping[str, Any] | None
    floor: Mapping[str, Any]
    settles: bool


def batch_steps(
    items: Sequence[CrudWrite | DdlChange], transactions: bool
) -> Iterator[list[SegmentItem] | Barrier]:
    """The segments and barriers of ``items``, in order (no empty segment)."""
    segment: list[SegmentItem] = []
    position, count = 0, len(items)
    while position < count:
        item = items[position]
        # Most items are plain document writes: one type test and one attribute each.
        if type(item) is CrudWrite:
            txn = item.transaction if transactions else None
            if txn is None:
                segment.append(item)
                position += 1
                continue
        else:
            assert isinstance(item, DdlChange)
            txn = transaction_of(item.event) if transactions else None
        before = _token_before(items, position)
        if txn is None:  # a DDL event outside a transaction
            assert isinstance(item, DdlChange)
            if segment:
                yield segment
                segment = []
            yield Barrier(item, before, item.event["_id"], settles=True)
            position += 1
            continue
        end = position
        while end < count and _transaction_key(items[end]) == txn:
            end += 1
        group = items[position:end]
        for ddl in (i for i in group if isinstance(i, DdlChange)):
            if segment:
                yield segment
                segment = []
            yield Barrier(ddl, before, _token_of(group[0]), settles=False)
        writes = [w for w in group if isinstance(w, CrudWrite)]
        if writes:
            segment.append(writes)
        position = end
    if segment:
        yield segment


def _token_before(
    items: Sequence[CrudWrite | DdlChange], position: int
) -> Mapping[str, Any] | None:
    """The token of the item before ``position`` (None: none in this batch)."""
    return _token_of(items[position - 1]) if position else None


def _transaction_key(item: CrudWrite | DdlChange) -> tuple[bytes, int] | None:
    return item.transaction if isinstance(item, CrudWrite) else transaction_of(item.event)


def _token_of(item: CrudWrite | DdlChange) -> Mapping[str, Any]:
    return item.token if isinstance(item, CrudWrite) else item.event["_id"]
