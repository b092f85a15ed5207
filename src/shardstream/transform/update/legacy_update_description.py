"""6.x's ``updateDescription`` of a pre-5.0 modifier update, and the internal
``rawUpdateDescription``: how ``change_stream_event_transform.cpp`` describes an update
entry that holds no ``$v: 2`` diff (``update_description`` parses the diffs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardstream.errors import TransformError
from shardstream.transform.update.update_description import is_object, object_pairs, shown

__all__ = ["legacy_update_description", "raw_update_description"]


def legacy_update_description(o: Mapping[str, Any]) -> dict[str, Any]:
    """6.x's ``updateDescription`` for a pre-5.0 modifier update (``$v`` 1 or missing).

    ``updatedFields`` is ``o.$set`` as is (``{}`` when absent) and ``removedFields``
    the field names of ``o.$unset`` (none unless it is an object). There is no
    ``truncatedArrays`` and no ``disambiguatedPaths``. 7.0 and later reject such
    entries instead (error 6741200, raised by the caller).

    Raises:
        TransformError: ``o`` is not an object (server code 40532).
    """
    if not is_object(o):
        raise TransformError(
            f'expected entry field "o" to be an object, got {shown(o)}', code=40532
        )
    fields = dict(reversed(object_pairs(o, None)))  # reversed: the first of a repeated name wins
    unset = fields.get("$unset")
    return {
        "updatedFields": fields.get("$set", {}),
        "removedFields": [name for name, _ in object_pairs(unset, None)]
        if is_object(unset)
        else [],
    }


def raw_update_description(o: Mapping[str, Any]) -> Mapping[str, Any]:
    """The internal ``rawUpdateDescription``: the oplog entry's ``o``, untouched.

    That is ``{$v: 2, diff: {...}}`` for delta updates and the modifier object for
    older ones; replacements never get one.
    """
    return o
