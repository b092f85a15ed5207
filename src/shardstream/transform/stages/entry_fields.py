"""Part of the transform stage: the entry's fields it reads, checked as the server checks them.

``ChangeStreamDefaultEventTransformation::applyTransformation`` (change_stream_event_transform.cpp)
reads ``ts``, ``ns``, ``op``, ``o``, ``wall`` and ``ui`` from each entry; a value of the wrong
type fails the stream (``checkValueType``: 40532) or, for ``op``, the IDL enum parser
(BadValue, 2).
"""

from __future__ import annotations

import datetime
import uuid as uuid_module
from collections.abc import Mapping
from typing import Any, Final

from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef

from shardstream.errors import TransformError

OP_TYPES: Final = frozenset({"i", "u", "d", "c", "n"})  # repl::OpType (oplog_entry.idl)
BAD_VALUE: Final = 2  # ErrorCodes::BadValue: an IDL enum value the parser does not know
WRONG_TYPE: Final = 40532  # DocumentSourceChangeStream::checkValueType


def check_op(op: Any) -> None:
    """Refuse an op that is not one of the oplog's five types, as the server does.

    server: ChangeStreamUnwindTransactionStage::_isTransactionOplogEntry parses every entry's
    op with repl::OpType_parse before the transform (an unknown name fails with BadValue, 2);
    the transform's getOplogOpType checks the type first (checkValueType: 40532).
    """
    if type(op) is not str:  # a BSON string; bson.code.Code (a str subclass) is another type
        raise TransformError(
            f"expected op to be a string (one of i, u, d, c, n), got {op!r:.40}", code=WRONG_TYPE
        )
    if op not in OP_TYPES:
        raise TransformError(
            f"expected op to be one of i, u, d, c, n, got {op!r:.40}", code=BAD_VALUE
        )


def document_field(entry: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The entry's field ``name``, which must be a document (``o`` is required by the
    oplog's own schema, oplog_entry.idl, so a missing one is refused, never skipped)."""
    value = entry.get(name)
    if isinstance(value, DBRef):
        # A document shaped {$ref, $id}: pymongo decodes it as a DBRef, but the server
        # stores and logs it as any document.
        return value.as_doc()
    if not isinstance(value, Mapping):
        raise TransformError(f"expected {name} to be a document, got {value!r:.100}")
    return value


def wall_time(entry: Mapping[str, Any]) -> Any:
    """The entry's ``wall``; server: checkValueType(wall, Date) uasserts 40532."""
    wall = entry.get("wall")
    if not isinstance(wall, datetime.datetime | DatetimeMS):
        raise TransformError(f"expected wall to be a Date, got {wall!r:.60}", code=WRONG_TYPE)
    return wall


_UUID_CACHE: dict[bytes, uuid_module.UUID] = {}
_UUID_CACHE_LIMIT = 10_000  # collection UUIDs repeat: a few per collection


def as_uuid(ui: Any) -> uuid_module.UUID | None:
    """The entry's ``ui`` as a UUID (None when absent); anything else is refused."""
    if ui is None:
        return None
    if isinstance(ui, uuid_module.UUID):
        return ui
    if isinstance(ui, Binary) and ui.subtype == 4 and len(ui) == 16:
        raw = bytes(ui)
        cached = _UUID_CACHE.get(raw)
        if cached is None:
            if len(_UUID_CACHE) >= _UUID_CACHE_LIMIT:
                _UUID_CACHE.clear()
            cached = _UUID_CACHE[raw] = uuid_module.UUID(bytes=raw)
        return cached
    raise TransformError(f"expected ui to be a UUID (BinData subtype 4), got {ui!r:.100}")
