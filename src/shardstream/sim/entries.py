"""Simulator: oplog entry bodies in the shapes and field order a 7.0+ shard writes them.

A *body* is an entry without its optime: the session fields, then the operation
(``op, ns, ui, o, o2``, ``fromMigrate``).  :func:`stamp` appends the optime fields
(``ts, t, v, wall``) and ``prevOpTime``, in the order ``repl/oplog_entry.idl``
serialises them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bson.binary import Binary
from bson.int64 import Int64
from bson.timestamp import Timestamp

TERM: Final = Int64(1)
OPLOG_VERSION: Final = Int64(2)
NULL_OP_TIME: Final = {"ts": Timestamp(0, 0), "t": Int64(-1)}

Body = dict[str, Any]


def _wall_of(ts: Timestamp) -> datetime.datetime:
    """The entry's ``wall``: the timestamp's seconds as a UTC datetime."""
    return datetime.datetime.fromtimestamp(ts.time, tz=datetime.UTC)


def stamp(body: Mapping[str, Any], ts: Timestamp, prev: Timestamp | None = None) -> Body:
    """Return ``body`` as a whole entry written at ``ts``.

    Args:
        body: the entry without optime fields.
        ts: its timestamp.
        prev: for a transaction entry, the ``ts`` of the previous entry of the same
            transaction (``prevOpTime``); pass ``Timestamp(0, 0)`` for the first one.
    """
    entry = {**body, "ts": ts, "t": TERM, "v": OPLOG_VERSION, "wall": _wall_of(ts)}
    if prev is not None:
        entry["prevOpTime"] = (
            dict(NULL_OP_TIME) if prev == Timestamp(0, 0) else {"ts": prev, "t": TERM}
        )
    return entry


def _crud(op: str, ns: str, ui: Binary, o: Any, o2: Any, from_migrate: bool) -> Body:
    body: Body = {"op": op, "ns": ns, "ui": ui, "o": o}
    if o2 is not None:
        body["o2"] = o2
    if from_migrate:
        body["fromMigrate"] = True
    return body


def insert(
    ns: str, ui: Binary, document: Mapping[str, Any], key: Mapping[str, Any], *, fm: bool = False
) -> Body:
    """An insert; ``o2`` is the document key (shard-key fields, then ``_id``)."""
    return _crud("i", ns, ui, dict(document), dict(key), fm)


def update(
    ns: str, ui: Binary, diff: Mapping[str, Any], key: Mapping[str, Any], *, fm: bool = False
) -> Body:
    """A ``$v:2`` delta update."""
    return _crud("u", ns, ui, {"$v": 2, "diff": dict(diff)}, dict(key), fm)


def replace(
    ns: str, ui: Binary, document: Mapping[str, Any], key: Mapping[str, Any], *, fm: bool = False
) -> Body:
    """A replacement update: ``o`` is the whole new document."""
    return _crud("u", ns, ui, dict(document), dict(key), fm)


def delete(ns: str, ui: Binary, key: Mapping[str, Any], *, fm: bool = False) -> Body:
    """A delete: ``o`` is the document key and there is no ``o2``."""
    return _crud("d", ns, ui, dict(key), None, fm)


def inner(body: Mapping[str, Any]) -> Body:
    """An operation as it sits inside ``applyOps``: ``op, ns, ui, o, o2`` only."""
    return {name: body[name] for name in ("op", "ns", "ui", "o", "o2") if name in body}


def command(db: str, ui: Binary, o: Mapping[str, Any], o2: Any = None, *, fm: bool = False) -> Body:
    """A command entry on ``<db>.$cmd`` (create, createIndexes, collMod)."""
    body: Body = {"op": "c", "ns": f"{db}.$cmd", "ui": ui, "o": dict(o)}
    if o2 is not None:
        body["o2"] = o2
    if fm:
        body["fromMigrate"] = True
    return body


def noop(message: Any, *, ns: str = "", ui: Binary | None = None, o2: Any = None) -> Body:
    """A no-op; the periodic no-op writer's is ``noop("periodic noop")``."""
    body: Body = {"op": "n", "ns": ns}
    if ui is not None:
        body["ui"] = ui
    body["o"] = {"msg": message}
    if o2 is not None:
        body["o2"] = o2
    return body


def apply_ops(
    session: Mapping[str, Any],
    ops: Sequence[Mapping[str, Any]],
    *,
    partial: bool = False,
    prepare: bool = False,
) -> Body:
    """A transaction ``applyOps`` entry on ``admin.$cmd``.

    Args:
        session: ``lsid`` and ``txnNumber``.
        ops: inner operations (see :func:`inner`).
        partial: not the last entry of the transaction (``partialTxn: true``).
        prepare: the last entry of a prepared transaction (``prepare: true``).
    """
    o: Body = {"applyOps": [dict(op) for op in ops]}
    if partial:
        o["partialTxn"] = True
    if prepare:
        o["prepare"] = True
    return {**session, "op": "c", "ns": "admin.$cmd", "o": o}


def commit_transaction(session: Mapping[str, Any], commit_ts: Timestamp) -> Body:
    """The ``commitTransaction`` entry of a prepared transaction."""
    return {
        **session,
        "op": "c",
        "ns": "admin.$cmd",
        "o": {"commitTransaction": 1, "commitTimestamp": commit_ts},
    }
