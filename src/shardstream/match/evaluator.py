"""A change stream's ``$match`` stages, evaluated client-side on each event.

``watch(pipeline=[{"$match": ...}])`` filters on the server; here the same query is compiled
once into a predicate over decoded events.  The query language is MongoDB's for a defined
subset (:data:`SUPPORTED_OPERATORS`), with the server's semantics: implicit traversal of
arrays along dotted paths, ``null`` matching a missing field, comparisons only within one
type bracket, and ``$ne`` / ``$nin`` / ``$not`` / ``$nor`` as plain negations.  The parse
mirrors matcher/expression_parser.cpp and the matching expression_leaf.cpp,
expression_array.cpp and path.cpp of MongoDB 8.0.  Anything outside the subset raises
ConfigurationError when the pipeline is compiled, never while events flow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from bson.regex import Regex

from shardstream.errors import ConfigurationError
from shardstream.match import leaves as leaves
from shardstream.match import values as bv

__all__ = ["SUPPORTED_OPERATORS", "compile_match", "compile_pipeline"]

Predicate: TypeAlias = Callable[[Mapping[str, Any]], bool]
_Test: TypeAlias = Callable[[Any], bool]

SUPPORTED_OPERATORS: Final = (
    "$and", "$or", "$nor", "$comment", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in",
    "$nin", "$exists", "$type", "$regex", "$options", "$not", "$all", "$size", "$elemMatch",
    "$mod",
)  # fmt: skip
_SUPPORTED: Final = ", ".join(SUPPORTED_OPERATORS)
_LOGICAL: Final[dict[str, Callable[[Any], bool]]] = {
    "$and": all, "$or": any, "$nor": lambda results: not any(results),
}  # fmt: skip
# Operators the server knows but this emulation does not: the error says so.
_UNSUPPORTED_TOP: Final = frozenset((
    "$expr", "$where", "$text", "$jsonSchema", "$alwaysTrue", "$alwaysFalse", "$sampleRate",
))  # fmt: skip
_UNSUPPORTED_PATH: Final = frozenset((
    "$geoWithin", "$within", "$geoIntersects", "$near", "$nearSphere",
    "$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear",
))  # fmt: skip
# An $elemMatch led by a top-level keyword is a query on documents, else operators on values.
_PATHLESS: Final = frozenset(("$and", "$or", "$nor", "$comment")) | _UNSUPPORTED_TOP
# Keywords that take a path: a document led by one is rejected inside $all.
_PATH_KEYWORDS: Final = frozenset(SUPPORTED_OPERATORS[4:]) - {"$not"} | _UNSUPPORTED_PATH


@dataclass(frozen=True, slots=True)
class _Leaf:
    """One path operator: a test of one value; ``expand`` also tests a leaf array's elements."""

    test: _Test
    expand: bool = True


@dataclass(frozen=True, slots=True)
class _Not:
    child: _Node


@dataclass(frozen=True, slots=True)
class _All:
    children: tuple[_Node, ...]


_Node: TypeAlias = "_Leaf | _Not | _All"


def compile_pipeline(pipeline: Sequence[Mapping[str, Any]]) -> Predicate | None:
    """Compile a change-stream pipeline of ``$match`` stages into one event predicate.

    Args:
        pipeline: the stages, as passed to pymongo's ``watch(pipeline=...)``.

    Returns:
        None for an empty pipeline (every event passes), else a predicate that is true when
        an event passes every ``$match``.

    Raises:
        ConfigurationError: a stage other than ``$match``, or a query outside the subset.
    """
    if isinstance(pipeline, str | bytes | Mapping) or not isinstance(pipeline, Sequence):
        raise ConfigurationError(f"pipeline must be a list of stages, got {pipeline!r}")
    predicates: list[Predicate] = []
    for position, stage in enumerate(pipeline):
        if not isinstance(stage, Mapping) or len(stage) != 1:
            raise ConfigurationError(f"stage {position} needs exactly one field: {stage!r}")
        ((name, spec),) = stage.items()
        if name != "$match":
            raise ConfigurationError(
                f"stage {position} is {name!r}, which client-side filtering does not support: "
                f"only $match stages are (several are ANDed), with {_SUPPORTED}"
            )
        predicates.append(compile_match(spec))
    return _conjunction(predicates) if predicates else None


def compile_match(query: Mapping[str, Any]) -> Predicate:
    """Compile one ``$match`` query into a predicate over decoded documents.

    Raises:
        ConfigurationError: the query is malformed or uses an operator outside the subset.
    """
    if not isinstance(query, Mapping):
        raise ConfigurationError(f"$match needs a document, got {query!r}")
    predicates: list[Predicate] = []
    for key, value in query.items():
        if key in _LOGICAL:
            predicates.append(_logical(key, value))
        elif not isinstance(key, str) or key.startswith("$"):
            if key == "$comment":
                continue
            what = "is not supported client-side" if key in _UNSUPPORTED_TOP else "is unknown"
            raise ConfigurationError(f"top-level operator {key} {what}; supported: {_SUPPORTED}")
        else:
            predicates.append(_on_path(_path_node(value), tuple(key.split("."))))
    return _conjunction(predicates)


def _conjunction(predicates: Sequence[Predicate]) -> Predicate:
    if len(predicates) == 1:
        return predicates[0]
    return lambda document: all(predicate(document) for predicate in predicates)


def _logical(operator: str, clauses: Any) -> Predicate:
    if not bv.is_array(clauses) or not clauses:
        raise ConfigurationError(f"{operator} must be a nonempty array, got {clauses!r}")
    if not all(isinstance(clause, Mapping) for clause in clauses):
        raise ConfigurationError(f"{operator} entries need to be full objects: {clauses!r}")
    predicates, combine = tuple(compile_match(c) for c in clauses), _LOGICAL[operator]
    return lambda document: combine(predicate(document) for predicate in predicates)


def _on_path(node: _Node, parts: tuple[str, ...]) -> Predicate:
    """Bind an operator tree to a path: a leaf passes if any value the path reaches passes."""
    if isinstance(node, _Leaf):
        test, expand = node.test, node.expand
        return lambda document: any(test(v) for v in bv.iter_path(document, parts, expand))
    if isinstance(node, _Not):
        inner = _on_path(node.child, parts)
        return lambda document: not inner(document)
    return _conjunction([_on_path(child, parts) for child in node.children])


def _on_value(node: _Node) -> _Test:
    """An operator tree as a test of one value (an $elemMatch element): no path, no traversal."""
    if isinstance(node, _Leaf):
        return node.test
    if isinstance(node, _Not):
        inner = _on_value(node.child)
        return lambda value: not inner(value)
    tests = tuple(_on_value(child) for child in node.children)
    return lambda value: all(test(value) for test in tests)


def _first_key(value: Any) -> Any:
    return next(iter(value), None) if isinstance(value, Mapping) else None


def _is_operator_document(value: Any) -> bool:
    # A document whose first key starts with '$' holds operators, unless it is a DBRef.
    first = _first_key(value)
    return isinstance(first, str) and first.startswith("$") and first not in ("$ref", "$id", "$db")


def _path_node(value: Any) -> _Node:
    return _operators(value) if _is_operator_document(value) else _Leaf(_equal_or_search(value))


def _equal_or_search(value: Any) -> _Test:
    # A regex given where a value is expected searches strings ({a: /x/}, $in, $all).
    if isinstance(value, Regex | re.Pattern):
        return leaves.regex_test(*bv.regex_source(value))
    return leaves.comparison_test("$eq", value)


def _operators(spec: Mapping[str, Any]) -> _Node:
    # Each operator is its own path predicate, so {$gt: 1, $lt: 5} may pass on two elements.
    if "$options" in spec and "$regex" not in spec:
        raise ConfigurationError("$options needs a $regex")
    nodes = [_operator(op, arg, spec) for op, arg in spec.items() if op != "$options"]
    return nodes[0] if len(nodes) == 1 else _All(tuple(nodes))


def _operator(operator: str, argument: Any, spec: Mapping[str, Any]) -> _Node:
    if operator in leaves.COMPARISONS:
        return _Leaf(leaves.comparison_test(operator, argument))
    if operator in ("$ne", "$nin"):
        if operator == "$ne" and isinstance(argument, Regex | re.Pattern):
            raise ConfigurationError("Can't have regex as arg to $ne.")
        return _Not(_operator("$eq" if operator == "$ne" else "$in", argument, spec))
    if operator == "$in":
        if not bv.is_array(argument):
            raise ConfigurationError(f"$in / $nin need an array, got {argument!r}")
        if any(_is_operator_document(item) for item in argument):
            raise ConfigurationError(f"cannot nest $ under $in / $nin: {argument!r}")
        tests = [_equal_or_search(item) for item in argument]
        return _Leaf(lambda value: any(test(value) for test in tests))
    if operator == "$exists":
        present = _Leaf(lambda value: value is not bv.MISSING)
        return present if bv.true_value(argument) else _Not(present)
    if operator == "$not":
        return _Not(_negated(argument))
    if operator == "$size":
        size = bv.exact_int64(argument) if bv.is_number(argument) else None
        if size is None or size < 0:
            raise ConfigurationError(f"$size needs a non-negative integer, got {argument!r}")
        return _Leaf(lambda value: bv.is_array(value) and len(value) == size, expand=False)
    if operator == "$all":
        return _all(argument)
    builder = _LEAF_BUILDERS.get(operator)
    if builder is None:
        what = "is not supported client-side" if operator in _UNSUPPORTED_PATH else "is unknown"
        raise ConfigurationError(f"operator {operator} {what}; supported: {_SUPPORTED}")
    return _Leaf(builder(spec if operator == "$regex" else argument), operator != "$elemMatch")


def _negated(argument: Any) -> _Node:
    if isinstance(argument, Regex | re.Pattern):
        return _Leaf(leaves.regex_test(*bv.regex_source(argument)))
    if not isinstance(argument, Mapping) or not argument:
        raise ConfigurationError(f"$not needs a regex or a nonempty document, got {argument!r}")
    return _operators(argument)


def _all(items: Any) -> _Node:
    if not bv.is_array(items):
        raise ConfigurationError(f"$all needs an array, got {items!r}")
    if not items:
        return _Leaf(lambda _: False)  # the server's AlwaysFalse
    elem_matches = [_first_key(item) == "$elemMatch" for item in items]
    if any(elem_matches):
        if not all(elem_matches):
            raise ConfigurationError("$all/$elemMatch has to be consistent")
        return _All(tuple(_Leaf(_elem_match(item["$elemMatch"]), False) for item in items))
    if any(_first_key(item) in _PATH_KEYWORDS for item in items):
        raise ConfigurationError(f"no $ expressions in $all: {items!r}")
    return _All(tuple(_Leaf(_equal_or_search(item)) for item in items))


def _elem_match(spec: Any) -> _Test:
    if not isinstance(spec, Mapping):
        raise ConfigurationError(f"$elemMatch needs an Object, got {spec!r}")
    if _is_operator_document(spec) and _first_key(spec) not in _PATHLESS:
        element_test = _on_value(_operators(spec))  # {$gt: 1}: operators on each element
        return lambda value: bv.is_array(value) and any(element_test(e) for e in value)
    match = compile_match(spec)  # {b: 1}: a query on each element that is a document
    return lambda value: (
        bv.is_array(value)
        and any(
            document is not None and match(document)
            for document in (bv.as_document(element, arrays=True) for element in value)
        )
    )


_LEAF_BUILDERS: Final[dict[str, Callable[[Any], _Test]]] = {
    "$regex": leaves.regex_document_test,
    "$type": leaves.type_test,
    "$elemMatch": _elem_match,
    "$mod": leaves.mod_test,
}
