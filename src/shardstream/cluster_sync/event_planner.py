"""Sync: each event the reader takes, planned at once as its target write.

The reader needs four things of an event: its cluster time (a transaction's events are held
until their time is complete), its resume token, its transaction and its write.
:class:`EventPlanner` gives them as a :data:`PlannedEvent` tuple, from the event's bytes on
the fast path and from its dict on the reference path:

* most fast-path events are planned in C (:data:`~.write_statements.compiled_statement`):
  nothing of them is decoded into Python objects but their namespace and token;
* every other event is decoded (:func:`~.sync_event.sync_event`) and planned by
  :func:`~.apply_rules.plan_event`, which gives the same write, or the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange, plan_event, transaction_of
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.sync_event import sync_event
from shardstream.cluster_sync.write_statements import compiled_statement

PlannedEvent = tuple[
    int | None, Mapping[str, Any], tuple[bytes, int] | None, CrudWrite | DdlChange | None
]
"""(cluster time as :func:`time_key` gives it, resume token, ``(lsid bytes, txnNumber)`` or
None, the write or None when there is nothing to apply)."""

_LOW_32: Final = 0xFFFFFFFF


def time_key(ts: object) -> int | None:
    """A cluster time as one int that sorts as it does (seconds << 32 | increment); None
    for anything not a Timestamp."""
    return (ts.time << 32) | ts.inc if isinstance(ts, Timestamp) else None


def timestamp_of(key: int) -> Timestamp:
    """The Timestamp of a :func:`time_key`."""
    return Timestamp(key >> 32, key & _LOW_32)


class EventPlanner:
    """Plans events for one sync's scope (:meth:`raw` and :meth:`document`, the two halves
    of ``ChangeStream.take_decoded``)."""

    def __init__(self, namespaces: NamespaceMap, *, compiled: bool = True) -> None:
        """Args: the sync's scope and mapping; ``compiled=False`` plans every event in
        Python (as an install without a compiler does; benchmarks compare the two)."""
        self._namespaces = namespaces
        self._compiled = compiled_statement if compiled else None

    def raw(self, raw: bytes) -> PlannedEvent:
        """A fast-path event, from its bytes."""
        compiled = self._compiled
        plan = compiled(raw) if compiled is not None else None
        if plan is None:
            return self.document(sync_event(raw))
        kind, db, coll, route, statement, token, time, lsid, number = plan
        transaction = None if lsid is None or number is None else (lsid, number)
        target = self._namespaces.crud_target(db, coll)
        if target is None:
            return time, token, transaction, None
        return (
            time,
            token,
            transaction,
            CrudWrite(target, route, statement, kind, token, transaction),
        )

    def document(self, event: dict[str, Any]) -> PlannedEvent:
        """An event as a dict (the reference path's, or a fast-path one decoded)."""
        item = plan_event(event, self._namespaces)
        transaction = item.transaction if isinstance(item, CrudWrite) else transaction_of(event)
        return time_key(event.get("clusterTime")), event["_id"], transaction, item
