"""Part of the transform stage: writes to ``<db>.system.views`` become DDL events.

Emulates ``ChangeStreamViewDefinitionEventTransformation`` (change_stream_event_transform.cpp,
8.0 line 00587bf0; 6.x 62d6f21d).  Database and cluster streams see a view's definition
being inserted, replaced or deleted as ``create``, ``modify`` or ``drop`` of the view, with
no ``collectionUUID`` and no ``stateBeforeChange``; the token still carries the ``ui`` of
``system.views``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.resume_token import ResumeTokenData, encode_token
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.stages.ddl_description import namespace_field, split_namespace, without

VIEWS_COLLECTION: Final = "system.views"
_BUCKETS_PREFIX: Final = "system.buckets."

# (ts, txnOpIndex, ui, operationType, documentKey, operationDescription) -> token data
TokenDataFactory = Callable[[Timestamp, int, Any, str, Any, Any], ResumeTokenData]


def view_event(
    entry: Mapping[str, Any],
    ts: Timestamp,
    token_data: TokenDataFactory,
    *,
    with_ns_type: bool,
) -> ChangeEvent:
    """Transform one CRUD entry on a ``system.views`` collection.

    ``with_ns_type`` (8.0.5 and later) adds ``nsType: view|timeseries`` to creates.
    """
    op = entry.get("op")
    o = entry.get("o")
    if not isinstance(o, Mapping):
        raise TransformError(f"expected o to be a document, got {o!r:.100}")
    view_namespace = o.get("_id")
    if not isinstance(view_namespace, str):
        raise TransformError(
            f"expected a system.views entry's o._id to be the view's namespace, got "
            f"{view_namespace!r:.100}"
        )
    description: Any = None
    ns_type: str | None = None
    if op == "i":
        operation_type = f.CREATE
        description = without(o, "_id")
        if with_ns_type:
            ns_type = _view_type(o.get("viewOn"))
    elif op == "u":
        operation_type = f.MODIFY
        description = without(o, "_id")
    elif op == "d":
        operation_type = f.DROP
    else:
        raise TransformError(
            f"expected an insert, update or delete on system.views, got op {op!r:.40}",
            code=6188600,
        )
    data = token_data(
        ts, entry.get(f.TXN_OP_INDEX) or 0, entry.get("ui"), operation_type, None, description
    )
    token = encode_token(data)
    event: dict[str, Any] = {
        f.ID: token.to_document(),
        f.OPERATION_TYPE: operation_type,
        f.CLUSTER_TIME: ts,
    }
    if "wall" in entry:  # copied unchecked; a missing value is simply not written
        event[f.WALL_TIME] = entry["wall"]
    event[f.NS] = namespace_field(*split_namespace(view_namespace))
    if description is not None:
        event[f.OPERATION_DESCRIPTION] = description
    if ns_type is not None:
        event[f.NS_TYPE] = ns_type
    return ChangeEvent(event, token, data)


def _view_type(view_on: Any) -> str:
    # determineCollectionType: a view over a buckets collection is a time-series collection;
    # a definition without viewOn would be a plain collection, which the server asserts against.
    if not isinstance(view_on, str) or not view_on:
        raise TransformError(
            f"expected a view definition's viewOn to be a non-empty string, got {view_on!r:.60}",
            code=8814202 if view_on is None else 8814203,
        )
    return "timeseries" if view_on.startswith(_BUCKETS_PREFIX) else "view"
