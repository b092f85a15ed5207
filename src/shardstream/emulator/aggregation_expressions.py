"""Emulator: the aggregation expressions an update pipeline and ``find``'s ``$expr`` use.

Expressions: field paths, ``$$ROOT``, ``$$CURRENT``, ``$$REMOVE`` and ``$let`` variables;
``$literal``, ``$let``, ``$cond``, ``$switch``, ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
``$lte``, ``$cmp``, ``$and``, ``$or``, ``$type``, ``$isArray``, ``$size``, ``$slice``,
``$arrayElemAt``, ``$concatArrays``, ``$range``, ``$map``, ``$getField``, ``$setField``,
``$unsetField`` and ``$bsonSize``, evaluated as mongod does; comparisons order values
across type brackets, as aggregation does (:mod:`~.bson_order`).  Anything else is refused
(``InvalidPipelineOperator``, 168), never guessed, so a test cannot pass on an expression
the emulator does not understand.

Values are what ``bson.decode`` gives; a field that is absent evaluates to ``MISSING``,
which ``$type`` calls ``"missing"`` and which is left out of documents and written as
``null`` in arrays, as on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import bson
from bson.dbref import DBRef
from bson.decimal128 import Decimal128

from shardstream.emulator.bson_order import MISSING_KEY, ORDERED, SortKey, bson_type_name, sort_key
from shardstream.emulator.faults import CommandError

MISSING: Final = type("Missing", (), {"__repr__": lambda _self: "MISSING"})()
REMOVE: Final = type("Remove", (), {"__repr__": lambda _self: "$$REMOVE"})()
Scope = dict[str, Any]


def evaluate(expr: Any, scope: Scope) -> Any:
    """The value of aggregation expression ``expr`` with variables ``scope``."""
    if isinstance(expr, str):
        if expr.startswith("$$"):
            name, _, rest = expr[2:].partition(".")
            if name == "REMOVE":
                return REMOVE
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
            if result is not MISSING and result is not REMOVE:
                out[key] = result
        return out
    return expr


def _walk(value: Any, dotted: str) -> Any:
    for part in dotted.split(".") if dotted else ():
        value = value.get(part, MISSING) if isinstance(value, dict) else MISSING
    return value


def _in_array(value: Any) -> Any:
    return None if value is MISSING or value is REMOVE else value


def _args(argument: Any, count: int, name: str) -> list[Any]:
    if not isinstance(argument, list) or len(argument) != count:
        raise CommandError(16020, "Location16020", f"{name} takes exactly {count} arguments")
    return argument


def _type(argument: Any, scope: Scope) -> str:
    value = evaluate(argument[0] if isinstance(argument, list) else argument, scope)
    return "missing" if value is MISSING or value is REMOVE else bson_type_name(value)


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
    if value is REMOVE:
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
    current = document if isinstance(document, dict) else dict(document)  # read, never written
    return _truthy(evaluate(expr, {"ROOT": current, "CURRENT": current}))


def _key(value: Any) -> SortKey:
    return MISSING_KEY if value is MISSING or value is REMOVE else sort_key(value)


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


def _bson_size(argument: Any, scope: Scope) -> int | None:
    value = evaluate(argument, scope)
    if value is None or value is MISSING:
        return None
    if not isinstance(value, dict):
        raise CommandError(31393, "Location31393", f"$bsonSize requires a document, got {value!r}")
    return len(bson.encode(value))


_OPERATORS: Final[dict[str, Callable[[Any, Scope], Any]]] = {
    "$literal": lambda argument, _scope: argument,
    "$let": _let,
    "$cond": _cond,
    "$switch": _switch,
    "$eq": _comparison("$eq", lambda c: c == 0),
    "$ne": _comparison("$ne", lambda c: c != 0),
    **{name: _comparison(name, result) for name, result in ORDERED.items()},
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
    "$bsonSize": _bson_size,
}
