"""The event columns the mirror's state reads, each checked as it is read.

A batch's events arrive as the source's rows (``spark/source/rows.py``): strings for the
namespace and the canonical Extended JSON of ``documentKey`` and ``to``, the update's diff
as its BSON bytes (``_oplogUpdate``). A column that does not hold what the mirror needs is
a :class:`~shardstream.errors.SinkError` naming the column, the event and what it held.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.errors import InvalidBSON

from shardstream.errors import SinkError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.spark.delta.mirror.keys import Namespace, RowKey, document_id

# Decoded as the oplog reader decodes entries (UUIDs stay BinData, out-of-range dates kept).
DIFF_CODEC_OPTIONS: Final = OPLOG_CODEC_OPTIONS


def rename_target(event: Mapping[str, Any]) -> Namespace:
    """A rename's ``to`` namespace."""
    text = event.get("to")
    try:
        target: Any = json.loads(text) if isinstance(text, str) else None
        return (str(target["db"]), str(target["coll"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise SinkError(
            f"expected a rename event's 'to' as {{db, coll}} Extended JSON, got {text!r:.200}"
        ) from exc


def oplog_diff(event: Mapping[str, Any]) -> dict[str, Any]:
    """An update's ``$v:2`` diff, from its BSON bytes (the ``_oplogUpdate`` column)."""
    raw = event.get("_oplogUpdate")
    if not isinstance(raw, bytes):
        raise SinkError(
            f"expected column '_oplogUpdate' to hold an update's BSON diff in event "
            f"{event.get('_id')}, got {raw!r:.100}"
        )
    try:
        # The values json_util's text of these bytes parses back to: a Symbol decodes as
        # str, Undefined as None and a DBPointer as a DBRef, as that text writes them.
        return bson.decode(raw, DIFF_CODEC_OPTIONS)
    except InvalidBSON as exc:
        raise SinkError(
            f"expected column '_oplogUpdate' to hold an update's BSON diff in event "
            f"{event.get('_id')}, got bytes that are not BSON ({exc})"
        ) from exc


def event_key(event: Mapping[str, Any]) -> RowKey:
    """The row an event names: its namespace and its ``documentKey``'s ``_id``."""
    db, coll = event_namespace(event)
    return (db, coll, document_id(required_text(event, "documentKey")))


def event_namespace(event: Mapping[str, Any]) -> Namespace:
    """The event's ``db`` and ``coll`` columns."""
    return (event_database(event), required_text(event, "coll"))


def event_database(event: Mapping[str, Any]) -> str:
    """The event's ``db`` column."""
    return required_text(event, "db")


def required_text(event: Mapping[str, Any], column: str) -> str:
    """The event's ``column``, which must hold a string.

    Raises:
        SinkError: it does not.
    """
    value = event.get(column)
    if not isinstance(value, str):
        raise SinkError(
            f"expected column {column!r} to be a string in a {event.get('operationType')!r} "
            f"event ({event.get('_id')}), got {value!r:.100}"
        )
    return value


def refuse_fragment(event: Mapping[str, Any]) -> None:
    """Raise SinkError for a fragment of a split event."""
    if event.get("_fragment") is not None:
        # A fragment carries only part of the event ($changeStreamSplitLargeEvent); the
        # mirror would need the reassembled event, which the stream never delivers whole.
        raise SinkError(
            f"expected whole events, got a fragment of a split {event['_fragment']!r} event "
            f"({event.get('_id')}): ingest without $changeStreamSplitLargeEvent"
        )
