"""Emulator: what an update's ``u`` does to one document.

Three forms, as mongod tells them apart: a replacement document (no ``$`` keys), an
operator document (``$set``, ``$unset``, ``$setOnInsert``, ``$inc``; paths may be dotted,
with array indexes, ``$[]`` and ``$[<id>]`` with ``arrayFilters``) and an update pipeline
(a list of stages, run by :mod:`shardstream.emulator.update_pipeline`). Any other operator,
and the positional ``$``, is refused with ``BadValue`` rather than guessed.

As since MongoDB 5.0, operator paths are applied in lexicographic order of their
components (numeric components in numeric order), so new fields land in the order mongod
gives them, whatever the order of the operator document. Every function works on a copy:
a stored document is never changed in place.

See also src/mongo/db/update/update_driver.cpp and update_object_node.cpp.
"""

from __future__ import annotations

import decimal
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.decimal128 import Decimal128, create_decimal128_context
from bson.int64 import Int64

from shardstream.emulator.cursors import MISSING, matches
from shardstream.emulator.document_store import id_first, same_bson
from shardstream.emulator.faults import WriteError

Body = dict[str, Any]
OPERATORS: Final = ("$set", "$unset", "$setOnInsert", "$inc")
_INT64_MAX: Final = 2**63 - 1
_DECIMAL: Final = create_decimal128_context()


def clone(value: Any) -> Any:
    """A copy of ``value`` whose documents and arrays are new (leaves are immutable)."""
    if isinstance(value, dict):
        return {key: clone(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clone(item) for item in value]
    return value


def is_replacement(u: Any) -> bool:
    """Whether ``u`` is a replacement document (rather than operators or a pipeline).

    Raises:
        WriteError: ``FailedToParse`` (9) when operators and fields are mixed.
    """
    if not isinstance(u, Mapping):
        return False
    dollars = [key.startswith("$") for key in u]
    if any(dollars) and not all(dollars):
        raise WriteError(9, "FailedToParse", "an update document mixes operators and fields")
    return not any(dollars)


def replace(pre: Mapping[str, Any] | None, replacement: Mapping[str, Any]) -> Body:
    """The document that ``replacement`` makes of ``pre`` (None: an upsert's new one).

    The matched document's ``_id`` is kept, first; a replacement may repeat it, not change it.
    """
    new = clone(dict(replacement))
    if pre is not None:
        if "_id" in new and not same_bson(new["_id"], pre["_id"]):
            raise _immutable()
        new["_id"] = pre["_id"]
    return id_first(new)


def upsert_seed(query: Mapping[str, Any]) -> Body:
    """The equality fields of ``query`` as a new document (dotted paths nested)."""
    doc: Body = {}
    for key, value in query.items():
        if key == "$and":
            for part in value:
                for name, item in upsert_seed(part).items():
                    doc.setdefault(name, item)
            continue
        if key.startswith("$"):
            continue
        if isinstance(value, Mapping) and value and all(k.startswith("$") for k in value):
            if "$eq" not in value:
                continue
            value = value["$eq"]
        _apply(doc, key, _set, value, {})
    return doc


def apply_operators(
    pre: Mapping[str, Any],
    u: Mapping[str, Any],
    array_filters: list[Mapping[str, Any]],
    *,
    inserting: bool,
) -> Body:
    """Apply operator document ``u`` to a copy of ``pre`` and return the copy.

    Args:
        pre: The matched document (or an upsert's seed).
        u: The operator document.
        array_filters: The update's ``arrayFilters``.
        inserting: Whether this is an upsert's insert (``$setOnInsert`` applies).

    Raises:
        WriteError: ``BadValue`` (2) for an unsupported operator; ``ConflictingUpdateOperators``
            (40); ``TypeMismatch`` (14) for ``$inc`` of a non-number; ``PathNotViable``
            (28); ``ImmutableField`` (66) when ``_id`` would change.
    """
    filters = _filters(array_filters)
    actions: list[tuple[list[tuple[int, Any]], str, str, Any]] = []
    for op, operand in u.items():
        if op not in OPERATORS:
            raise WriteError(2, "BadValue", f"emulator does not support the update operator {op}")
        if not isinstance(operand, Mapping):
            raise WriteError(9, "FailedToParse", f"Modifiers operate on fields; {op} got a value")
        for path, value in operand.items():
            if "$" in path.replace("$[", ""):
                raise WriteError(2, "BadValue", f"emulator does not support the path {path!r}")
            actions.append((_sort_key(path), path, op, value))
    actions.sort(key=lambda action: action[0])
    for (_, path, _, _), (_, later, _, _) in itertools.pairwise(actions):
        if later == path or later.startswith(path + "."):
            raise WriteError(
                40,
                "ConflictingUpdateOperators",
                f"Updating the path '{later}' would create a conflict at '{path}'",
            )
    doc: Body = clone(dict(pre))
    for _, path, op, value in actions:
        if op == "$setOnInsert" and not inserting:
            continue
        if op == "$unset":
            _apply(doc, path, _remove, value, filters, create=False)
        else:
            _apply(doc, path, _increment if op == "$inc" else _set, value, filters)
    if "_id" in pre and ("_id" not in doc or not same_bson(doc["_id"], pre["_id"])):
        raise _immutable()
    return doc


def _sort_key(path: str) -> list[tuple[int, Any]]:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in path.split(".")]


def _immutable() -> WriteError:
    return WriteError(
        66,
        "ImmutableField",
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    )


def _filters(array_filters: list[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    # Each filter names one identifier: {"x": ...} or {"x.field": ...}.
    filters: dict[str, Mapping[str, Any]] = {}
    for spec in array_filters:
        names = {key.partition(".")[0] for key in spec}
        if len(names) != 1:
            raise WriteError(9, "FailedToParse", f"an array filter names one identifier: {spec}")
        filters[names.pop()] = spec
    return filters


Action = Callable[[Any, Any, Any], None]  # (container, field name or index, operand)


def _apply(
    node: Any,
    path: str,
    action: Action,
    operand: Any,
    filters: Mapping[str, Any],
    *,
    create: bool = True,
) -> None:
    # Walk the path one component at a time; $[] and $[<id>] fan out over array elements.
    parts = path.split(".")
    containers = [node]
    for depth, part in enumerate(parts):
        resolved = [(parent, key) for parent in containers for key in _keys(parent, part, filters)]
        if depth == len(parts) - 1:
            for parent, key in resolved:
                action(parent, key, operand)
            return
        containers = []
        for parent, key in resolved:
            child = _get(parent, key)
            if child is MISSING and create:
                child = {}
                _put(parent, key, child)
            elif not isinstance(child, dict | list):
                if create:
                    raise WriteError(
                        28, "PathNotViable", f"Cannot create field '{parts[depth + 1]}' in {key}"
                    )
                continue
            containers.append(child)


def _keys(node: Any, part: str, filters: Mapping[str, Any]) -> list[Any]:
    if isinstance(node, dict):
        if part.startswith("$["):
            raise WriteError(2, "BadValue", f"cannot apply array updates to non-array: {part}")
        return [part]
    if part == "$[]":
        return list(range(len(node)))
    if part.startswith("$[") and part.endswith("]"):
        ident = part[2:-1]
        if ident not in filters:
            raise WriteError(2, "BadValue", f"No array filter found for identifier '{ident}'")
        return [i for i, item in enumerate(node) if matches({ident: item}, filters[ident])]
    if part.isdigit():
        return [int(part)]
    raise WriteError(28, "PathNotViable", f"Cannot create field '{part}' in an array")


def _get(node: Any, key: Any) -> Any:
    if isinstance(node, dict):
        return node.get(key, MISSING)
    return node[key] if key < len(node) else MISSING


def _put(node: Any, key: Any, value: Any) -> None:
    if isinstance(node, dict):
        node[key] = value  # an existing field keeps its place; a new one is appended
        return
    node.extend([None] * (key + 1 - len(node)))  # mongod pads an array with nulls
    node[key] = value


def _set(node: Any, key: Any, value: Any) -> None:
    _put(node, key, clone(value))


def _remove(node: Any, key: Any, _operand: Any) -> None:
    if isinstance(node, dict):
        node.pop(key, None)
    elif key < len(node):
        node[key] = None  # $unset of an array element leaves null in its place


def _increment(node: Any, key: Any, amount: Any) -> None:
    if not _numeric(amount):
        raise WriteError(14, "TypeMismatch", f"Cannot increment with non-numeric argument {amount}")
    current = _get(node, key)
    if current is MISSING:
        _put(node, key, amount)
        return
    if not _numeric(current):
        raise WriteError(
            14, "TypeMismatch", f"Cannot apply $inc to a value of non-numeric type: {current!r}"
        )
    _put(node, key, _add(current, amount))


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float | Decimal128) and not isinstance(value, bool)


def _add(a: Any, b: Any) -> Any:
    # BSON's promotion: decimal > double > long > int (an int that overflows becomes long).
    if isinstance(a, Decimal128) or isinstance(b, Decimal128):
        return Decimal128(_DECIMAL.add(_to_decimal(a), _to_decimal(b)))
    if isinstance(a, float) or isinstance(b, float):
        return float(a) + float(b)
    total = int(a) + int(b)
    if not -_INT64_MAX - 1 <= total <= _INT64_MAX:
        raise WriteError(2, "BadValue", f"$inc overflows a 64-bit integer: {a} + {b}")
    return Int64(total) if isinstance(a, Int64) or isinstance(b, Int64) else total


def _to_decimal(value: Any) -> decimal.Decimal:
    return value.to_decimal() if isinstance(value, Decimal128) else decimal.Decimal(value)
