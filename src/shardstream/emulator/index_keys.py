"""Emulator: index specs and index keys, as mongod shapes and reads them.

``index_spec`` puts a spec in mongod's order and refuses one without a key or a name;
``index_key`` reads a document's key in an index (``{field: value}`` in the pattern's
order, a missing field as null; none for a document a partial or sparse index leaves out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from shardstream.emulator.cursors import MISSING, lookup, matches
from shardstream.emulator.faults import CommandError

Body = dict[str, Any]
ID_INDEX: Final = {"v": 2, "key": {"_id": 1}, "name": "_id_"}


def index_options(spec: Mapping[str, Any]) -> Body:
    """An index spec's options: everything but ``v``, ``key`` and ``name``."""
    return {k: v for k, v in spec.items() if k not in ("v", "key", "name")}


def index_spec(spec: Mapping[str, Any]) -> Body:
    """An index spec in mongod's order, ``{v: 2, key, name, ...options}``.

    Raises:
        CommandError: ``FailedToParse`` (9) without a ``key`` document or a ``name``.
    """
    if not isinstance(spec.get("key"), Mapping) or not spec["key"]:
        raise CommandError(9, "FailedToParse", f"index spec needs a 'key' document: {spec!r}")
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        raise CommandError(9, "FailedToParse", f"index spec needs a 'name': {spec!r}")
    return {"v": 2, "key": dict(spec["key"]), "name": spec["name"], **index_options(spec)}


def index_key(spec: Mapping[str, Any], doc: Mapping[str, Any]) -> Body | None:
    """``doc``'s key in the index ``spec`` (None: the index does not hold ``doc``: a
    partial index's filter refuses it, or a sparse index and every field missing)."""
    if "partialFilterExpression" in spec and not matches(doc, spec["partialFilterExpression"]):
        return None
    value = _key_value(doc, spec["key"])
    if spec.get("sparse") and all(v is None for v in value.values()):
        return None
    return value


def _key_value(doc: Mapping[str, Any], pattern: Mapping[str, Any]) -> Body:
    """The index key of ``doc``: ``{field: value}`` in pattern order, null when missing."""
    values = {field: lookup(doc, field) for field in pattern}
    return {field: None if value is MISSING else value for field, value in values.items()}


def render_key(value: Any) -> str:
    """An index key as mongod prints a duplicate key (``{ _id: "a" }``), for messages."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k}: {render_key(v)}" for k, v in value.items()) + " }"
    return "null" if value is None else str(value)
