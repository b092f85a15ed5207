"""Emulator: the update-pipeline subset a sync target is sent, evaluated as mongod does.

Stages: ``$replaceWith`` / ``$replaceRoot``, ``$set`` / ``$addFields`` (top-level and dotted
names into sub-documents) and ``$unset``.  Expressions: field paths, ``$$ROOT``,
``$$CURRENT``, ``$$REMOVE`` and ``$let`` variables; ``$literal``, ``$let``, ``$cond``,
``$switch``, ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$cmp``, ``$and``,
``$or``, ``$type``, ``$isArray``, ``$size``, ``$slice``, ``$arrayElemAt``,
``$concatArrays``, ``$range``, ``$map``, ``$getField``, ``$setField`` and ``$unsetField``.
The same expressions answer ``find``'s ``$expr`` (:func:`expression_is_true`); comparisons
order values across type brackets, as aggregation does (:mod:`~.bson_order`).
Anything else is refused (``InvalidPipelineOperator``, 168), never guessed, so a test
cannot pass on an expression the emulator does not understand.

Values are what ``bson.decode`` gives; a field that is absent evaluates to ``MISSING``,
which ``$type`` calls ``"missing"`` and which is left out of documents and written as
``null`` in arrays, as on the server.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.binary import Binary
from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.emulator.bson_order import MISSING_KEY, SortKey, sort_key
from shardstream.emulator.faults import CommandError

MISSING: Final = type("Missing", (), {"__repr__": lambda _self: "MISSING"})()
_REMOVE: Final = type("Remove", (), {"__repr__": lambda _self: "$$REMOVE"})()
Scope = dict[str, Any]


def run_update_pipeline(document: Mapping[str, Any], pipeline: list[Any]) -> dict[str, Any]:
    """Return ``document`` after the update pipeline's stages, in order.

    Raises:
        CommandError: an unsupported stage or expression, or a type error the server
            reports (a non-document result of ``$replaceWith``, ``$size`` of a non-array).
    """
    current: dict[str, Any] = dict(document)
    for stage in pipeline:
        if not isinstance(stage, Mapping) or len(stage) != 1:
            raise CommandError(40323, "Location40323", "a pipeline stage must have one field")
        ((name, spec),) = stage.items()
        if name in ("$replaceWith", "$replaceRoot"):
            expr = spec["newRoot"] if name == "$replaceRoot" else spec
            result = evaluate(expr, {"ROOT": current, "CURRENT": current})
            if not isinstance(result, dict):
                raise CommandError(
                    40228, "Location40228", f"'newRoot' must evaluate to an object, got {result!r}"
                )
            current = result
        elif name in ("$set", "$addFields"):
            scope = {"ROOT": current, "CURRENT": current}
            values = [(path, evaluate(expr, scope)) for path, expr in spec.items()]
            current = dict(current)
            for path, value in values:
                _put_path(current, path.split("."), value)
        elif name == "$unset":
            current = dict(current)
            for path in [spec] if isinstance(spec, str) else spec:
                _put_path(current, path.split("."), _REMOVE)
        else:
            raise CommandError(168, "InvalidPipelineOperator", f"unsupported stage {name}")
    return current


def _put_path(document: dict[str, Any], parts: list[str], value: Any) -> None:
    head = parts[0]
    if len(parts) == 1:
        if value is _REMOVE or value is MISSING:
            document.pop(head, None)
        else:
            document[head] = value
        return
    child = document.get(head)
    child = dict(child) if isinstance(child, dict) else {}
    _put_path(child, parts[1:], value)
    document[head] = child


def evaluate(expr: Any, scope: Scope) -> Any:
    """The value of aggregation expression ``expr`` with variables ``scope``."""
    if isinstance(expr, str):
        if expr.startswith("$$"):
            name, _, rest = expr[2:].partition(".")
            if name == "REMOVE":
                return _REMOVE
            if name not in scope:
                raise CommandError(17276, "Location17276", f"Use of undefined variable: {name}")
            return _walk(scope[name], rest)
        if expr.startswith("$"):
            return _walk(scope["CURRENT"], expr[1:])
        return expr
    if isinstance(expr, list):
        return [_in_array(evaluate(item, scope)) for item in expr]
    if isinstance(expr, dict) and expr and next(iter(expr)).startswith("$"):
        (operator, argument), *more = expr.items()
        handler = _OPERATORS.get(operator)
        if handler is None or more:
            raise CommandError(168, "InvalidPipelineOperator", f"unsupported {operator}")
        return handler(argument, scope)
    if isinstance(expr, dict):
        out = {}
        for key, value in expr.items():
            result = evaluate(value, scope)
            if result is not MISSING and result is not _REMOVE:
                out[key] = result
        return out
    return expr


def _walk(value: Any, dotted: str) -> Any:
    for part in dotted.split(".") if dotted else ():
        value = value.get(part, MISSING) if isinstance(value, dict) else MISSING
    return value


def _in_array(value: Any) -> Any:
    return None if value is MISSING or value is _REMOVE else value


def _args(argument: Any, count: int, name: str) -> list[Any]:
    if not isinstance(argument, list) or len(argument) != count:
        raise CommandError(16020, "Location16020", f"{name} takes exactly {count} arguments")
    return argument


def type_name(value: Any) -> str:
    """The ``$type`` name of a decoded BSON value."""
    if value is MISSING or value is _REMOVE:
        return "missing"
    if isinstance(value, Code):  # before str: Code subclasses it
        return "javascript" if value.scope is None else "javascriptWithScope"
    if isinstance(value, int) and not isinstance(value, bool | Int64):
        # bson encodes a Python int outside int32's range as an int64.
        return "int" if -(2**31) <= value < 2**31 else "long"
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    raise CommandError(2, "BadValue", f"no BSON type for {type(value).__name__}")


_TYPE_NAMES: Final[tuple[tuple[type | tuple[type, ...], str], ...]] = (
    (bool, "bool"),
    (Int64, "long"),
    (float, "double"),
    (str, "string"),
    ((dict, DBRef), "object"),
    (list, "array"),
    ((Binary, bytes), "binData"),
    (ObjectId, "objectId"),
    ((datetime.datetime, DatetimeMS), "date"),
    (type(None), "null"),
    ((Regex, re.Pattern), "regex"),
    (Timestamp, "timestamp"),
    (Decimal128, "decimal"),
    (MinKey, "minKey"),
    (MaxKey, "maxKey"),
)


def _type(argument: Any, scope: Scope) -> str:
    return type_name(evaluate(argument[0] if isinstance(argument, list) else argument, scope))


def _document(value: Any, operator: str) -> dict[str, Any] | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, DBRef):
        return dict(value.as_doc())
    if not isinstance(value, dict):
        raise CommandError(4161105, "Location4161105", f"{operator} needs a document input")
    return value


def _field_name(spec: Mapping[str, Any], scope: Scope) -> str:
    name = evaluate(spec["field"], scope)
    if not isinstance(name, str):
        raise CommandError(4161106, "Location4161106", "'field' must be a string")
    return name


def _get_field(spec: Any, scope: Scope) -> Any:
    name = _field_name(spec, scope)
    document = _document(evaluate(spec.get("input", "$$CURRENT"), scope), "$getField")
    return MISSING if document is None else document.get(name, MISSING)


def _set_field(spec: Any, scope: Scope) -> Any:
    name = _field_name(spec, scope)
    document = _document(evaluate(spec["input"], scope), "$setField")
    if document is None:
        return None
    value = evaluate(spec["value"], scope)
    out = dict(document)
    if value is _REMOVE:
        out.pop(name, None)
    else:
        out[name] = value  # an existing field keeps its place, a new one goes last
    return out


def _unset_field(spec: Any, scope: Scope) -> Any:
    return _set_field({**spec, "value": "$$REMOVE"}, scope)


def _let(spec: Any, scope: Scope) -> Any:
    inner = dict(scope)
    for name, expr in spec["vars"].items():
        inner[name] = evaluate(expr, scope)
    return evaluate(spec["in"], inner)


def _cond(argument: Any, scope: Scope) -> Any:
    if isinstance(argument, Mapping):
        argument = [argument["if"], argument["then"], argument["else"]]
    test, then, otherwise = _args(argument, 3, "$cond")
    return evaluate(then if _truthy(evaluate(test, scope)) else otherwise, scope)


def _switch(spec: Any, scope: Scope) -> Any:
    for branch in spec["branches"]:
        if _truthy(evaluate(branch["case"], scope)):
            return evaluate(branch["then"], scope)
    if "default" not in spec:
        raise CommandError(40066, "Location40066", "$switch found no matching branch")
    return evaluate(spec["default"], scope)


def _truthy(value: Any) -> bool:
    if isinstance(value, Decimal128):
        return value.to_decimal() != 0  # a Decimal128 zero is false, as any numeric zero
    return value not in (False, None, 0) and value is not MISSING


def expression_is_true(expr: Any, document: Mapping[str, Any]) -> bool:
    """Whether ``find``'s ``{$expr: expr}`` holds for ``document``.

    Raises:
        CommandError: an unsupported expression (``InvalidPipelineOperator``, 168).
    """
    current = dict(document)
    return _truthy(evaluate(expr, {"ROOT": current, "CURRENT": current}))


def _key(value: Any) -> SortKey:
    return MISSING_KEY if value is MISSING or value is _REMOVE else sort_key(value)


def _comparison(name: str, result: Callable[[int], Any]) -> Callable[[Any, Scope], Any]:
    def compare(argument: Any, scope: Scope) -> Any:
        left, right = (_key(evaluate(item, scope)) for item in _args(argument, 2, name))
        return result((left > right) - (left < right))

    return compare


def _all(argument: Any, scope: Scope) -> bool:
    return all(_truthy(evaluate(item, scope)) for item in _operands(argument))


def _any(argument: Any, scope: Scope) -> bool:
    return any(_truthy(evaluate(item, scope)) for item in _operands(argument))


def _operands(argument: Any) -> list[Any]:
    return argument if isinstance(argument, list) else [argument]


def _array(value: Any, operator: str) -> list[Any]:
    if not isinstance(value, list):
        raise CommandError(28689, "Location28689", f"{operator} needs an array, got {value!r}")
    return value


def _size(argument: Any, scope: Scope) -> int:
    value = evaluate(argument[0] if isinstance(argument, list) else argument, scope)
    return len(_array(value, "$size"))


def _slice(argument: Any, scope: Scope) -> Any:
    values = [evaluate(item, scope) for item in argument]
    array = _array(values[0], "$slice")
    if len(values) == 2:
        count = int(values[1])
        return array[:count] if count >= 0 else array[count:]
    position, count = int(values[1]), int(values[2])
    if count <= 0:
        raise CommandError(28729, "Location28729", "$slice count must be positive")
    start = position if position >= 0 else max(0, len(array) + position)
    return array[start : start + count]


def _element_at(argument: Any, scope: Scope) -> Any:
    array, index = (evaluate(item, scope) for item in _args(argument, 2, "$arrayElemAt"))
    index = int(index)
    array = _array(array, "$arrayElemAt")
    return array[index] if -len(array) <= index < len(array) else MISSING


def _concat(argument: Any, scope: Scope) -> Any:
    out: list[Any] = []
    for item in argument:
        out += _array(evaluate(item, scope), "$concatArrays")
    return out


def _range(argument: Any, scope: Scope) -> list[int]:
    bounds = [int(evaluate(item, scope)) for item in argument]
    return list(range(*bounds))


def _map(spec: Any, scope: Scope) -> list[Any]:
    name = spec.get("as", "this")
    return [
        _in_array(evaluate(spec["in"], {**scope, name: item}))
        for item in _array(evaluate(spec["input"], scope), "$map")
    ]


_OPERATORS: Final[dict[str, Callable[[Any, Scope], Any]]] = {
    "$literal": lambda argument, _scope: argument,
    "$let": _let,
    "$cond": _cond,
    "$switch": _switch,
    "$eq": _comparison("$eq", lambda c: c == 0),
    "$ne": _comparison("$ne", lambda c: c != 0),
    "$gt": _comparison("$gt", lambda c: c > 0),
    "$gte": _comparison("$gte", lambda c: c >= 0),
    "$lt": _comparison("$lt", lambda c: c < 0),
    "$lte": _comparison("$lte", lambda c: c <= 0),
    "$cmp": _comparison("$cmp", lambda c: c),
    "$and": _all,
    "$or": _any,
    "$type": _type,
    "$isArray": lambda argument, scope: isinstance(
        evaluate(argument[0] if isinstance(argument, list) else argument, scope), list
    ),
    "$size": _size,
    "$slice": _slice,
    "$arrayElemAt": _element_at,
    "$concatArrays": _concat,
    "$range": _range,
    "$map": _map,
    "$getField": _get_field,
    "$setField": _set_field,
    "$unsetField": _unset_field,
}
