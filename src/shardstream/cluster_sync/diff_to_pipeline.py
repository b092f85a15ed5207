"""Sync: an update entry's ``$v: 2`` diff as an update pipeline any 5.0+ target accepts.

An update event's ``updateDescription`` cannot say everything the oplog's diff says (an
array element set past the end pads with nulls, ``l`` cuts an array, an ``i`` field moves
to the end), so the sync replays the diff itself, read from ``rawUpdateDescription``.
Operator updates (``$set``/``$unset``) cannot move a field to the end or pad an array the
way the diff applier does, and they break on field names holding ``.`` or starting with
``$``; a pipeline of ``$replaceWith`` stages built from ``$setField``/``$unsetField`` can.

Each stage rewrites one place: it walks from ``$$ROOT`` down the path (``$let`` binds each
level once, so a stage grows with the depth, not exponentially), changes that level and
rebuilds the levels above. The stages keep the applier's order within a level (deletes,
then ``u`` fields in place or appended, sub-diffs in place, then ``i`` fields removed and
appended), and its rules for a sub-diff whose field is missing (nothing happens) or of the
wrong type (``null``), so a target in step with the source gets the source's bytes:
``transform.update.apply_update`` is the reference the tests hold this to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from shardstream.errors import ShardstreamError

Expr = Any
Stage = dict[str, Any]
# One step of a path: a field of a document or an element of an array.
Step = tuple[str, str | int]
_INT32_MAX: Final = 2**31 - 1


class UnsupportedDiff(ShardstreamError):
    """A diff the sync cannot express as an update (a binary ``b`` section)."""


def diff_to_pipeline(update: Mapping[str, Any]) -> list[Stage]:
    """The pipeline that applies ``update`` (``{$v: 2, diff: {...}}``) to a document.

    Raises:
        UnsupportedDiff: the diff has a binary (``b``) section or is not a ``$v: 2`` diff.
    """
    diff = update.get("diff")
    if update.get("$v") != 2 or not isinstance(diff, Mapping):
        raise UnsupportedDiff(f"expected an update {{$v: 2, diff: {{...}}}}, got {update!r:.200}")
    stages: list[Stage] = []
    _document_stages(diff, (), stages)
    return stages


def _document_stages(diff: Mapping[str, Any], path: tuple[Step, ...], out: list[Stage]) -> None:
    def stage(change: Callable[[Expr], Expr]) -> Stage:
        return _stage(path, change, "object")

    inserts: list[tuple[str, Any]] = []
    subdiffs: list[tuple[str, Mapping[str, Any]]] = []
    for section, body in diff.items():
        kind = section[:1]
        if kind == "d":
            for name in body:
                out.append(stage(partial(_unset_field, name)))
        elif kind == "u":
            for name, value in body.items():
                out.append(stage(partial(_set_field, name, value=_lit(value))))
        elif kind == "i":
            inserts = list(body.items())
        elif kind == "s":
            subdiffs.append((section[1:], body))
        else:
            raise UnsupportedDiff(
                f"expected diff sections d, u, i, s<field>, got {section!r} "
                "(a binary 'b' section cannot be written as an update pipeline)"
            )
    for name, child in subdiffs:
        expected = _kind_of(child)
        out.append(stage(partial(_guard_field, name, kind=expected)))
        _subdiff_stages(child, (*path, ("f", name)), out)
    for name, value in inserts:
        out.append(stage(partial(_move_to_end, name, value=_lit(value))))


def _array_stages(diff: Mapping[str, Any], path: tuple[Step, ...], out: list[Stage]) -> None:
    def stage(change: Callable[[Expr], Expr]) -> Stage:
        return _stage(path, change, "array")

    for name, value in diff.items():
        if name == "a":
            continue
        if name == "l":
            out.append(stage(partial(_resize, size=int(value))))
        elif name[:1] == "u":
            index = int(name[1:])
            out.append(stage(partial(_set_element, index=index, value=_lit(value))))
        elif name[:1] == "s":
            index, expected = int(name[1:]), _kind_of(value)
            out.append(stage(partial(_guard_element, index=index, kind=expected)))
            _subdiff_stages(value, (*path, ("i", index)), out)
        else:
            raise UnsupportedDiff(f"expected array diff entries l, u<i>, s<i>, got {name!r}")


def _subdiff_stages(diff: Mapping[str, Any], path: tuple[Step, ...], out: list[Stage]) -> None:
    if _kind_of(diff) == "array":
        _array_stages(diff, path, out)
    else:
        _document_stages(diff, path, out)


def _kind_of(diff: Mapping[str, Any]) -> str:
    return "array" if next(iter(diff), None) == "a" else "object"


# -- one stage: descend the path, change the level, rebuild upwards ----------------------


def _stage(path: tuple[Step, ...], change: Callable[[Expr], Expr], kind: str) -> Stage:
    """A stage applying ``change`` to the level at ``path``, a value of type ``kind``."""
    return {"$replaceWith": _rebuild("$$ROOT", path, change, kind, 0)}


def _rebuild(
    level: Expr, path: tuple[Step, ...], change: Callable[[Expr], Expr], kind: str, depth: int
) -> Expr:
    if not path:
        return change(level)
    (step, key), rest = path[0], path[1:]
    var = f"p{depth}"
    # Every level on a path was type-checked by its guard stage; a level that is not the
    # kind the diff expects (null after the guard, or missing) is left as it is.
    wanted = kind if not rest else ("array" if rest[0][0] == "i" else "object")
    inner = _rebuild(f"$${var}", rest, change, kind, depth + 1)
    changed = {"$cond": [{"$eq": [{"$type": f"$${var}"}, wanted]}, inner, f"$${var}"]}
    if step == "f":
        name = str(key)
        child = _get_field(name, level)
        return {
            "$let": {
                "vars": {var: child},
                "in": _set_field(name, level, _keep_missing(f"$${var}", changed)),
            }
        }
    index = int(key)
    return {
        "$let": {
            "vars": {var: {"$arrayElemAt": [level, index]}},
            "in": _set_element(level, index, changed),
        }
    }


def _keep_missing(value: Expr, otherwise: Expr) -> Expr:
    # $setField with $$REMOVE leaves a missing field missing instead of writing null.
    return {"$cond": [{"$eq": [{"$type": value}, "missing"]}, "$$REMOVE", otherwise]}


def _guard_field(name: str, level: Expr, kind: str) -> Expr:
    """A sub-diff's field: missing stays missing, the wrong type becomes null."""
    child = _get_field(name, level)
    checked = {"$cond": [{"$eq": [{"$type": child}, kind]}, child, None]}
    return _set_field(name, level, _keep_missing(child, checked))


def _guard_element(level: Expr, index: int, kind: str) -> Expr:
    """A sub-diff's element: past the end or of the wrong type it becomes null (padded)."""
    child = {"$arrayElemAt": [level, index]}
    return _set_element(level, index, {"$cond": [{"$eq": [{"$type": child}, kind]}, child, None]})


# -- expression builders ----------------------------------------------------------------


def _lit(value: Any) -> Expr:
    return {"$literal": value}


def _name(name: str) -> Expr:
    # $setField takes a constant; one starting with '$' would read as a field path.
    return {"$literal": name} if name.startswith("$") else name


def _get_field(name: str, level: Expr) -> Expr:
    return {"$getField": {"field": _name(name), "input": level}}


def _set_field(name: str, level: Expr, value: Expr) -> Expr:
    return {"$setField": {"field": _name(name), "input": level, "value": value}}


def _unset_field(name: str, level: Expr) -> Expr:
    return {"$unsetField": {"field": _name(name), "input": level}}


def _move_to_end(name: str, level: Expr, value: Expr) -> Expr:
    # An `i` field goes to the end even when it exists: remove it, then append it.
    return _set_field(name, _unset_field(name, level), value)


def _nulls_from_size_to(level: Expr, end: int) -> Expr:
    # One null per missing position: $range is empty when the array already reaches `end`.
    return {"$map": {"input": {"$range": [{"$size": level}, end]}, "in": None}}


def _resize(level: Expr, size: int) -> Expr:
    """The diff's ``l``: cut the array to ``size`` elements, or pad it with nulls to it."""
    if size == 0:
        return []
    return {"$concatArrays": [{"$slice": [level, size]}, _nulls_from_size_to(level, size)]}


def _set_element(level: Expr, index: int, value: Expr) -> Expr:
    """Element ``index`` set to ``value``; an array shorter than that is padded with nulls."""
    parts: list[Expr] = []
    if index > 0:
        parts += [{"$slice": [level, index]}, _nulls_from_size_to(level, index)]
    parts += [[value], {"$slice": [level, index + 1, _INT32_MAX]}]
    return {"$concatArrays": parts}
