"""Emulator: the projections ``find`` and ``aggregate``'s ``$project`` apply.

Inclusions (``{a: 1, b: 1}``, ``_id`` kept unless ``_id: 0``) and exclusions
(``{a: 0}``) of top-level fields; an included document keeps its fields in their stored
order, as on the server. Dotted, ``$``-named and computed fields are refused with
``BadValue``, never approximated.

See also src/mongo/db/query/projection_parser.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shardstream.emulator.faults import CommandError


def projector(spec: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """What shapes each document by the inclusion or exclusion projection ``spec`` (None:
    unchanged), checked once, before any document, as the server parses it.

    Raises:
        CommandError: ``BadValue`` for a dotted, ``$``-named or computed field;
            ``Location31254`` for an exclusion in an inclusion projection.
    """
    if not spec:
        return lambda doc: doc
    included, excluded = _parse(spec)
    keep_id = bool(spec.get("_id", True))
    # {_id: 1} alone is an inclusion of _id only, {_id: 0} alone an exclusion of it.
    if included or (not excluded and "_id" in spec and keep_id):
        return lambda doc: {
            name: value
            for name, value in doc.items()
            if name in included or (name == "_id" and keep_id)
        }
    return lambda doc: {
        name: value
        for name, value in doc.items()
        if name not in excluded and (name != "_id" or keep_id)
    }


def _parse(spec: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    included: set[str] = set()
    excluded: set[str] = set()
    for name, flag in spec.items():
        if "." in name or name.startswith("$"):
            raise CommandError(2, "BadValue", f"emulator projects top-level fields only: {name}")
        if not isinstance(flag, bool | int | float):
            raise CommandError(2, "BadValue", f"emulator projects with 0 or 1 only: {name}")
        if name != "_id":
            (included if flag else excluded).add(name)
    if included and excluded:
        raise CommandError(
            31254,
            "Location31254",
            f"Cannot do exclusion on field {min(excluded)} in inclusion projection",
        )
    return included, excluded
