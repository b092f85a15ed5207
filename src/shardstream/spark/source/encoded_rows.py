"""A row straight from an encoded event's BSON: the fast path's events, never decoded to dicts.

An :class:`EncodedEvent` holds the event as the server would send it.  Its top level is
read in one walk by the compiled ``event_fields`` (``transform/raw/_event_fields.c``), which
writes every document column with the raw Extended JSON writer: the text ``json_util``
writes for the decoded document (``transform.raw.extended_json``).  What the compiled walk
leaves (a Decimal128 or ``$ref`` inside a document, a field of an unexpected type, bytes it
cannot read) is read here in Python from a ``RawBSONDocument``: the reference the compiled
walk follows.  The values are the ones :func:`shardstream.spark.source.rows.event_values`
builds from the decoded event (``tests/spark/test_rows.py`` holds all three to that).
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
from shardstream.resume_token.bson_values import date_millis
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.raw.extended_json import bson_to_json

try:
    from shardstream.transform.raw._ejson import event_fields as _compiled_fields
except ImportError:  # installed without a C compiler: the Python reader takes every event
    _compiled_fields = None  # type: ignore[assignment]

# Event fields written as Extended JSON strings, in the order they appear as columns
# (rows.EVENT_SCHEMA, which takes them from here, and the compiled event_fields).
DOCUMENT_COLUMNS: Final = (
    "documentKey",
    "fullDocument",
    "updateDescription",
    "fullDocumentBeforeChange",
    "to",
    "operationDescription",
)


def encoded_event_values(event: EncodedEvent, *, relaxed: bool) -> tuple[Any, ...]:
    """The row values of ``event`` in ``rows.VALUE_NAMES`` order, read from its BSON."""
    fields = None if _compiled_fields is None else _compiled_fields(event.raw, relaxed)
    if fields is None:
        fields = python_event_fields(event.raw, relaxed=relaxed)
    if fields[1] is None:  # clusterTime is not a Timestamp: the token's
        time = event.token_data.cluster_time
        fields = (fields[0], time.time, time.inc, *fields[3:])
    return (
        *token_columns(event),
        *fields,
        event.shard,
        update_bytes(event.raw_update),
        event.fragment_of,
    )


def token_columns(event: ChangeEvent) -> tuple[str, str | None]:
    """``_id`` (the token's ``_data``) and ``_idTypeBits`` (its ``_typeBits`` as hex, if any)."""
    type_bits = event.token.type_bits
    return event.token.data, None if type_bits is None else type_bits.hex().upper()


def python_event_fields(raw: bytes, *, relaxed: bool) -> tuple[Any, ...]:
    """What the compiled ``event_fields`` returns for ``raw``, read in Python.

    (operationType, clusterTime t, clusterTime i, wallTime ms, db, coll, collectionUUID,
    the :data:`DOCUMENT_COLUMNS` as Extended JSON, txnNumber, lsid as Extended JSON).
    """
    # The top level's values, nested documents left as bytes (RawBSONDocument).
    top = dict(RawBSONDocument(raw, RAW_OPLOG_CODEC_OPTIONS).items())
    cluster_time = top.get("clusterTime")
    ns = top.get("ns")
    db = coll = None
    if isinstance(ns, RawBSONDocument):
        db, coll = ns.get("db"), ns.get("coll")
    uuid_value = top.get("collectionUUID")
    if isinstance(uuid_value, Binary) and uuid_value.subtype == UUID_SUBTYPE:
        uuid_value = uuid_value.as_uuid()
    txn_number = top.get("txnNumber")
    timed = cluster_time if isinstance(cluster_time, Timestamp) else None
    return (
        top.get("operationType"),
        timed.time if timed is not None else None,
        timed.inc if timed is not None else None,
        millis(top.get("wallTime")),
        db,
        coll,
        str(uuid_value) if isinstance(uuid_value, uuid.UUID) else None,
        *(_json(top.get(name), relaxed) for name in DOCUMENT_COLUMNS),
        int(txn_number) if txn_number is not None else None,
        _json(top.get("lsid"), relaxed),
    )


def _json(value: Any, relaxed: bool) -> str | None:
    if isinstance(value, RawBSONDocument):
        return bson_to_json(_bytes_of(value), relaxed=relaxed)
    if value is None:
        return None
    # Not a document (no event field the fast path writes is one): the writer takes
    # a whole document, so wrap the value and cut its text back out.
    text = bson_to_json(bson.encode({"v": value}), relaxed=relaxed)
    return text[len('{"v": ') : -1]


def update_bytes(update: Any) -> bytes | None:
    """A fast-path event's update ``o`` (a ``RawBSONDocument``) as its bytes; None for no
    update, or for a dict event's (whose row is read from its dicts)."""
    return _bytes_of(update) if isinstance(update, RawBSONDocument) else None


def _bytes_of(document: RawBSONDocument) -> bytes:
    raw = document.raw  # bytes when decoded from bytes, as every document here is
    return raw if isinstance(raw, bytes) else bytes(raw)


def millis(value: Any) -> int | None:
    """A decoded ``wallTime`` as ms since the epoch (the column's value before Arrow)."""
    if not isinstance(value, datetime.datetime):
        return None  # absent, or out of datetime's range (kept exact in the token)
    return date_millis(value)
