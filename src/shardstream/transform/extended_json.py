"""Output: change events as canonical Extended JSON lines.

The same text ``bson.json_util.dumps(event, json_options=CANONICAL_JSON_OPTIONS)``
writes, except that a :class:`FieldList` (an ``updatedFields`` with a repeated
key, which the server does emit) keeps every pair.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bson import json_util
from bson.dbref import DBRef
from bson.raw_bson import RawBSONDocument

from shardstream.resume_token.token_json import JSON_OPTIONS, to_json_ready
from shardstream.transform.field_list import FieldList


def event_to_json(event: Mapping[str, Any]) -> str:
    """Serialise one event (or any document) as a line of canonical Extended JSON.

    Events decoded by pymongo hold only types json_util writes, so the whole event
    goes through it in one call; the slower field-by-field writer is used when an
    ``updateDescription`` holds a FieldList, or a value needs rewriting first.
    """
    description = event.get("updateDescription")
    if isinstance(description, Mapping) and any(
        isinstance(part, FieldList) for part in description.values()
    ):
        return _write(event)
    try:
        return json_util.dumps(event, json_options=JSON_OPTIONS)
    except TypeError:  # a Symbol-free but otherwise foreign value (UUID, DBPointer, ...)
        return _write(event)


def _write(value: Any) -> str:
    if isinstance(value, FieldList) or (
        isinstance(value, Mapping) and not isinstance(value, DBRef | RawBSONDocument)
    ):
        inner = ", ".join(f"{json.dumps(key)}: {_write(item)}" for key, item in value.items())
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_write(item) for item in value) + "]"
    return json_util.dumps(to_json_ready(value), json_options=JSON_OPTIONS)
