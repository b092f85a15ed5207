"""Emulator: the ``$group`` stage, with the accumulators ``$sum``, ``$min`` and ``$max``.

Groups come out in the order their first document came in (the server makes no promise;
one order keeps a test reproducible).  ``$sum`` adds the numbers among its values and
ignores the rest (``{"$sum": 1}`` counts); ``$min`` and ``$max`` compare in the server's
order across types (:mod:`~.bson_order`) and ignore missing values and nulls.  Other
accumulators are refused (``Location15952``), never guessed.

See also src/mongo/db/pipeline/document_source_group.cpp and accumulator_sum.cpp,
accumulator_min_max.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import bson
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument

from shardstream.emulator.aggregation_expressions import MISSING, evaluate
from shardstream.emulator.bson_order import sort_key
from shardstream.emulator.faults import CommandError

_Fold = Callable[[Any, Any], Any]


def _sum(total: Any, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return total  # $sum skips what is not a number
    added = total + value
    if isinstance(added, int) and not isinstance(total, float) and not -(2**31) <= added < 2**31:
        return Int64(added)  # an int32 sum that overflows widens, as the server's does
    return added


def _extreme(keep_larger: bool) -> _Fold:
    def fold(best: Any, value: Any) -> Any:
        if value is None or value is MISSING:
            return best
        if best is None:
            return value
        larger = sort_key(value) > sort_key(best)
        return value if larger == keep_larger else best

    return fold


_ACCUMULATORS: Final[dict[str, tuple[_Fold, Callable[[], Any]]]] = {
    "$sum": (_sum, lambda: 0),
    "$max": (_extreme(True), lambda: None),
    "$min": (_extreme(False), lambda: None),
}


def group_documents(docs: list[Any], spec: Any) -> list[dict[str, Any]]:
    """The ``$group`` stage ``spec`` over ``docs``.

    Raises:
        CommandError: ``Location15955`` without ``_id``, ``Location15952`` for an
            accumulator outside the subset.
    """
    if not isinstance(spec, Mapping) or "_id" not in spec:
        raise CommandError(15955, "Location15955", "a group specification must include an _id")
    fields: list[tuple[str, _Fold, Callable[[], Any], Any]] = []
    for name, accumulator in spec.items():
        if name == "_id":
            continue
        if not isinstance(accumulator, Mapping) or len(accumulator) != 1:
            raise CommandError(
                40234, "Location40234", f"the field {name!r} must be an accumulator object"
            )
        ((operator, argument),) = accumulator.items()
        if operator not in _ACCUMULATORS:
            raise CommandError(
                15952, "Location15952", f"unknown group operator {operator!r} (emulator)"
            )
        fold, initial = _ACCUMULATORS[operator]
        fields.append((name, fold, initial, argument))
    groups: dict[bytes, dict[str, Any]] = {}
    for doc in docs:
        decoded = bson.decode(doc.raw) if isinstance(doc, RawBSONDocument) else doc
        scope = {"ROOT": decoded, "CURRENT": decoded}
        key = evaluate(spec["_id"], scope)
        key = None if key is MISSING else key
        identity = bson.encode({"k": key})
        group = groups.get(identity)
        if group is None:
            group = groups[identity] = {"_id": key, **{f[0]: f[2]() for f in fields}}
        for name, fold, _initial, argument in fields:
            group[name] = fold(group[name], evaluate(argument, scope))
    return list(groups.values())
