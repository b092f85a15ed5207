"""Builders of oplog entries shaped like a 7.0+ server writes them, for tests."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from bson.binary import Binary
from bson.int64 import Int64
from bson.timestamp import Timestamp

COLLECTION_UUID = Binary(uuid.UUID("6948df80-14bd-4e04-8842-7668d9c001f5").bytes, 4)
WALL = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
NULL_OPTIME = {"ts": Timestamp(0, 0), "t": Int64(-1)}
LSID = {"id": Binary(uuid.UUID("77777777-7777-4777-8777-777777777777").bytes, 4)}


def _tail(ts: Timestamp, **extra: Any) -> dict[str, Any]:
    return {**extra, "ts": ts, "t": Int64(1), "v": Int64(2), "wall": WALL}


def insert(ts: Timestamp, doc: dict[str, Any], ns: str = "db.coll", **extra: Any) -> dict[str, Any]:
    """An insert of ``doc`` (documentKey ``{_id}``)."""
    return {
        "op": "i",
        "ns": ns,
        "ui": COLLECTION_UUID,
        "o": doc,
        "o2": {"_id": doc["_id"]},
        **_tail(ts, **extra),
    }


def update(
    ts: Timestamp, key: Any, diff: dict[str, Any], ns: str = "db.coll", **extra: Any
) -> dict[str, Any]:
    """A ``$v:2`` update of the document with ``_id`` ``key``."""
    return {
        "op": "u",
        "ns": ns,
        "ui": COLLECTION_UUID,
        "o": {"$v": 2, "diff": diff},
        "o2": {"_id": key},
        **_tail(ts, **extra),
    }


def delete(ts: Timestamp, key: Any, ns: str = "db.coll", **extra: Any) -> dict[str, Any]:
    """A delete of the document with ``_id`` ``key``."""
    return {"op": "d", "ns": ns, "ui": COLLECTION_UUID, "o": {"_id": key}, **_tail(ts, **extra)}


def command(ts: Timestamp, db: str, o: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A command entry on ``db.$cmd``."""
    entry = {"op": "c", "ns": f"{db}.$cmd", "ui": COLLECTION_UUID, "o": o, **_tail(ts, **extra)}
    if "dropDatabase" in o:
        del entry["ui"]
    return entry


def noop(ts: Timestamp, o2: dict[str, Any] | None = None, ns: str = "") -> dict[str, Any]:
    """A no-op (periodic noop by default)."""
    entry: dict[str, Any] = {"op": "n", "ns": ns, "o": {"msg": "periodic noop"}}
    if o2 is not None:
        entry["o2"] = o2
        entry["ui"] = COLLECTION_UUID
    return {**entry, **_tail(ts)}


def apply_ops(
    ts: Timestamp,
    ops: list[dict[str, Any]],
    *,
    prev: Timestamp | None = None,
    partial: bool = False,
    prepare: bool = False,
    txn_number: int = 1,
) -> dict[str, Any]:
    """A transaction applyOps entry of ``ops`` (each without ts/wall)."""
    o: dict[str, Any] = {"applyOps": ops}
    if partial:
        o["partialTxn"] = True
    if prepare:
        o["prepare"] = True
    return {
        "lsid": LSID,
        "txnNumber": Int64(txn_number),
        "op": "c",
        "ns": "admin.$cmd",
        "o": o,
        **_tail(ts, prevOpTime=NULL_OPTIME if prev is None else {"ts": prev, "t": Int64(1)}),
    }


def commit(
    ts: Timestamp, prev: Timestamp, commit_ts: Timestamp, txn_number: int = 1
) -> dict[str, Any]:
    """The commitTransaction entry of a prepared transaction."""
    return {
        "lsid": LSID,
        "txnNumber": Int64(txn_number),
        "op": "c",
        "ns": "admin.$cmd",
        "o": {"commitTransaction": 1, "commitTimestamp": commit_ts},
        **_tail(ts, prevOpTime={"ts": prev, "t": Int64(1)}),
    }


def inner(op: dict[str, Any]) -> dict[str, Any]:
    """An entry as it appears inside applyOps (no ts, wall, t, v)."""
    return {k: v for k, v in op.items() if k not in ("ts", "t", "v", "wall")}
