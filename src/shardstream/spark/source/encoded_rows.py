"""A row straight from an encoded event's BSON: the fast path's events, never decoded to dicts.

An :class:`EncodedEvent` holds the event as the server would send it.  Its top level is
read once (``RawBSONDocument``: nested documents stay bytes) and every document column is
written by the raw Extended JSON writer from those bytes, which gives the text
``json_util`` writes for the decoded document (``transform.raw.extended_json``).  The row
is the one :func:`shardstream.spark.source.rows.event_to_row` builds from the decoded
event (``tests/spark/test_rows.py`` holds both to that on both corpora).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any, Final

import bson
from bson.binary import UUID_SUBTYPE, Binary
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.transform.raw.extended_json import bson_to_json

# Event fields written as Extended JSON strings, in the order they appear as columns
# (rows.EVENT_SCHEMA, which takes them from here).
DOCUMENT_COLUMNS: Final = (
    "documentKey",
    "fullDocument",
    "updateDescription",
    "fullDocumentBeforeChange",
    "to",
    "operationDescription",
)


def encoded_event_row(event: EncodedEvent, *, relaxed: bool) -> dict[str, Any]:
    """The row of ``event`` (column name -> value), read from its BSON."""
    # The top level's values, nested documents left as bytes (RawBSONDocument).
    top = dict(RawBSONDocument(event.raw, RAW_OPLOG_CODEC_OPTIONS).items())
    cluster_time = top.get("clusterTime")
    if not isinstance(cluster_time, Timestamp):
        cluster_time = event.token_data.cluster_time
    ns = top.get("ns")
    db = coll = None
    if isinstance(ns, RawBSONDocument):
        db, coll = ns.get("db"), ns.get("coll")
    uuid_value = top.get("collectionUUID")
    if isinstance(uuid_value, Binary) and uuid_value.subtype == UUID_SUBTYPE:
        uuid_value = uuid_value.as_uuid()
    txn_number = top.get("txnNumber")
    raw_update = event.raw_update
    type_bits = event.token.type_bits
    row: dict[str, Any] = {
        "_id": event.token.data,
        "_idTypeBits": None if type_bits is None else type_bits.hex().upper(),
        "operationType": top.get("operationType"),
        "clusterTime": {"t": cluster_time.time, "i": cluster_time.inc},
        "wallTime": utc(top.get("wallTime")),
        "db": db,
        "coll": coll,
        "collectionUUID": str(uuid_value) if isinstance(uuid_value, uuid.UUID) else None,
    }
    for name in DOCUMENT_COLUMNS:
        row[name] = _json(top.get(name), relaxed)
    row["txnNumber"] = int(txn_number) if txn_number is not None else None
    row["lsid"] = _json(top.get("lsid"), relaxed)
    row["shard"] = event.shard
    row["_oplogUpdate"] = _bytes_of(raw_update) if isinstance(raw_update, RawBSONDocument) else None
    row["_fragment"] = event.fragment_of
    return row


def _json(value: Any, relaxed: bool) -> str | None:
    if isinstance(value, RawBSONDocument):
        return bson_to_json(_bytes_of(value), relaxed=relaxed)
    if value is None:
        return None
    # Not a document (no event field the fast path writes is one): the writer takes
    # a whole document, so wrap the value and cut its text back out.
    text = bson_to_json(bson.encode({"v": value}), relaxed=relaxed)
    return text[len('{"v": ') : -1]


def _bytes_of(document: RawBSONDocument) -> bytes:
    raw = document.raw  # bytes when decoded from bytes, as every document here is
    return raw if isinstance(raw, bytes) else bytes(raw)


def utc(value: Any) -> datetime.datetime | None:
    if not isinstance(value, datetime.datetime):
        return None  # absent, or out of datetime's range (kept exact in the token)
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
