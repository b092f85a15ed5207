"""Resume token data as Extended JSON documents (the ``token decode/encode`` contract).

Keys follow the token's own order: ``clusterTime, version, tokenType,
txnOpIndex, fromInvalidate, uuid`` then ``documentKey`` (v0/v1/legacy) or
``eventIdentifier`` (v2) when present, then ``fragmentNum`` when present.
Values are written as canonical Extended JSON so every BSON type survives,
including the three pymongo folds into others (Symbol, Undefined, DBPointer).
"""

from __future__ import annotations

import json
import uuid as uuid_module
from collections.abc import Callable, Mapping
from typing import Any, Final

import bson
from bson import json_util
from bson.binary import Binary
from bson.code import Code
from bson.codec_options import DatetimeConversion
from bson.dbref import DBRef
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.bson_values import (
    UNDEFINED,
    DBPointer,
    Symbol,
    _UndefinedType,
    millis_to_date,
)
from shardstream.resume_token.json_input import MAX_JSON_DEPTH, depth_problem
from shardstream.resume_token.token_data import ResumeTokenData, TokenType

try:  # the compiled reader (setup.py: optional, as a C compiler may be missing)
    from shardstream.resume_token._json_read import document_bson as _compiled_bson
    from shardstream.resume_token._json_read import loads as _compiled_loads
except ImportError:  # pragma: no cover - tests/resume_token/test_json_read.py fails instead
    _compiled_loads = None  # type: ignore[assignment]
    _compiled_bson = None  # type: ignore[assignment]

JSON_OPTIONS: Final = json_util.CANONICAL_JSON_OPTIONS.with_options(
    datetime_conversion=DatetimeConversion.DATETIME_AUTO
)
_KEYS: Final = (
    "clusterTime",
    "version",
    "tokenType",
    "txnOpIndex",
    "fromInvalidate",
    "uuid",
    "documentKey",
    "eventIdentifier",
    "fragmentNum",
)


def token_data_to_document(data: ResumeTokenData) -> dict[str, Any]:
    """Return the token's fields as an ordered document of BSON values."""
    document: dict[str, Any] = {
        "clusterTime": data.cluster_time,
        "version": data.version,
        "tokenType": int(data.token_type),
        "txnOpIndex": data.txn_op_index,
        "fromInvalidate": data.from_invalidate,
        "uuid": None if data.uuid is None else Binary(data.uuid.bytes, 4),
    }
    if data.version >= 2:
        if data.event_identifier is not None:
            document["eventIdentifier"] = data.event_identifier
    elif data.document_key is not None:
        document["documentKey"] = data.document_key
    if data.fragment_num is not None:
        document["fragmentNum"] = data.fragment_num
    return document


def token_data_from_document(document: Mapping[str, Any]) -> ResumeTokenData:
    """Build token data from the document form (``version`` is required).

    Raises:
        ResumeTokenError: a key is unknown or a value has the wrong type.
    """
    unknown = [key for key in document if key not in _KEYS]
    if unknown:
        raise ResumeTokenError(f"expected only the keys {list(_KEYS)}, got also {unknown!r}")
    if "version" not in document:
        raise ResumeTokenError("expected a 'version' key (0, 1 or 2), got none")
    cluster_time = document.get("clusterTime")
    if not isinstance(cluster_time, Timestamp):
        raise ResumeTokenError(
            f"expected clusterTime as {{'$timestamp': {{'t': ..., 'i': ...}}}}, got "
            f"{cluster_time!r:.100}"
        )
    return ResumeTokenData(
        cluster_time=cluster_time,
        version=_plain_int(document["version"], "version"),
        token_type=_plain_int(document.get("tokenType", TokenType.EVENT), "tokenType"),
        txn_op_index=_plain_int(document.get("txnOpIndex", 0), "txnOpIndex"),
        from_invalidate=_bool(document.get("fromInvalidate", False)),
        uuid=_uuid_or_none(document.get("uuid")),
        document_key=document.get("documentKey"),
        event_identifier=document.get("eventIdentifier"),
        fragment_num=(
            None
            if document.get("fragmentNum") is None
            else _plain_int(document["fragmentNum"], "fragmentNum")
        ),
    )


def dumps(value: Any) -> str:
    """Serialise BSON values as one line of canonical Extended JSON."""
    return json_util.dumps(to_json_ready(value), json_options=JSON_OPTIONS)


def loads(text: str) -> Any:
    """Parse Extended JSON, keeping Symbol, Undefined and DBPointer distinct.

    Raises:
        ValueError: (as ``json.loads``) the text is not JSON, or nests deeper than
            ``json_input.MAX_JSON_DEPTH``; a malformed type wrapper can raise any of
            ``json_input.EXTENDED_JSON_ERRORS``, which callers catch.
    """
    if _compiled_loads is not None:
        # C takes the common case (a document's canonical text) and leaves the rest here.
        found = _compiled_loads(text, _UNSURE, Int64, ObjectId, _naive_date, MAX_JSON_DEPTH)
        if found is not _UNSURE:
            return found
    return python_loads(text)


def document_bson(text: str) -> bytes:
    """The BSON of a document's canonical Extended JSON: what ``bson.encode(loads(text))``
    writes, byte for byte, without the Python values where the compiled writer is sure.

    Raises:
        ValueError: as :func:`loads`; ``bson.errors.InvalidDocument``: a value BSON cannot
            hold as ``loads`` reads it (shardstream's own Undefined or DBPointer).
    """
    if _compiled_bson is not None:
        found = _compiled_bson(text, MAX_JSON_DEPTH)
        if found is not None:
            return found
    return bson.encode(loads(text))


def python_loads(text: str) -> Any:
    """:func:`loads` without its compiled half: the reference the C reader is tested
    against."""
    problem = depth_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return json.loads(text, object_pairs_hook=_object_pairs_hook)


_UNSURE: Final = object()  # the compiled reader's "not read here"


def _naive_date(millis: Int64) -> Any:
    """{"$date": {"$numberLong": ...}} as the hook below builds it."""
    return millis_to_date(millis, aware=False)


# The commonest type wrappers, parsed as json_util parses them (with a string value, alone
# in their object), without its lookup of every parser name.
_SCALARS: Final[dict[str, Callable[[str], Any]]] = {
    "$numberInt": int,
    "$numberLong": Int64,
    "$numberDouble": float,
    "$oid": ObjectId,
}


def _object_pairs_hook(pairs: list[tuple[str, Any]]) -> Any:
    if len(pairs) == 1:  # most objects of canonical text: a type wrapper
        key, value = pairs[0]
        if key[:1] != "$":
            return {key: value}
        parse = _SCALARS.get(key)
        if parse is not None and isinstance(value, str):
            return parse(value)  # what json_util's parser for the name returns
        if key == "$date" and isinstance(value, Int64):
            # canonical {"$date": {"$numberLong": ...}}: json_util's value (naive UTC, as
            # JSON_OPTIONS decodes), without its ~14 us of checks
            return _naive_date(value)
        if key == "$symbol" and isinstance(value, str):
            return Symbol(value)
        if key == "$undefined" and value is True:
            return UNDEFINED
        if key == "$dbPointer" and isinstance(value, DBRef) and value.database is None:
            return DBPointer(value.collection, value.id)
        return json_util.object_pairs_hook(pairs, JSON_OPTIONS)
    for key, _ in pairs:
        if key[:1] == "$":
            return json_util.object_pairs_hook(pairs, JSON_OPTIONS)
    # No "$" name: json_util returns the plain document as it is (its parsers are all for
    # "$" names); building it here skips its per-name lookups, most of a mirror update's
    # decoding time.
    return dict(pairs)


def to_json_ready(value: Any) -> Any:
    """Rewrite the values json_util cannot write (Symbol, Undefined, DBPointer, UUID)."""
    if isinstance(value, Symbol):
        return {"$symbol": str(value)}
    if isinstance(value, _UndefinedType):
        return {"$undefined": True}
    if isinstance(value, DBPointer):
        return {"$dbPointer": {"$ref": value.namespace, "$id": value.oid}}
    if isinstance(value, uuid_module.UUID):
        return Binary(value.bytes, 4)
    if isinstance(value, Code):
        return value if value.scope is None else Code(str(value), to_json_ready(value.scope))
    if isinstance(value, Mapping) and not isinstance(value, DBRef):
        return {key: to_json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_ready(item) for item in value]
    return value


def _plain_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResumeTokenError(f"expected {name} to be an integer, got {value!r:.100}")
    return int(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ResumeTokenError(f"expected fromInvalidate to be true or false, got {value!r}")
    return value


def _uuid_or_none(value: Any) -> uuid_module.UUID | None:
    if value is None:
        return None
    if isinstance(value, uuid_module.UUID):
        return value
    if isinstance(value, Binary) and value.subtype == 4 and len(value) == 16:
        return uuid_module.UUID(bytes=bytes(value))
    if isinstance(value, str):
        try:
            return uuid_module.UUID(value)
        except ValueError:
            pass
    raise ResumeTokenError(
        f"expected uuid as BinData subtype 4 (16 bytes), a UUID string or null, got {value!r:.100}"
    )
