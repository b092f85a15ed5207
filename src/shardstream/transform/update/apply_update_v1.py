"""Helper: apply a pre-5.0 ``$v: 1`` update (``$set`` / ``$unset``) as mongod does.

Emulates ``UpdateDriver`` in oplog-application mode, the way the post-image stage
(document_source_change_stream_add_post_image.cpp) and secondaries use it: the update tree of
update_object_node.cpp, ``ModifierNode::applyToNonexistentElement`` (modifier_node.cpp),
unset_node.cpp and ``pathsupport::createPathAt`` (path_support.cpp).  Facts it follows:

* paths apply in tree order: at every level, children sorted by field name (plain string
  order, as the pre-5.0 servers that wrote ``$v: 1`` entries did; 5.0+ sorts numeric names
  numerically, which only changes where several new numeric-named fields land);
* ``$set`` of an existing path replaces the value in place; a missing path is created from its
  deepest existing ancestor: appended to a document as nested documents (numeric parts too),
  or written into an array at a numeric index after padding with ``null``;
* a path blocked by a scalar, or naming a field inside an array, is skipped (PathNotViable is
  ignored during oplog application, so the other paths still apply);
* ``$unset`` removes a document field, sets an array element to ``null``, and ignores missing
  paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any, Final

from bson.dbref import DBRef

from shardstream.errors import TransformError

__all__ = ["apply_modifiers", "is_array", "is_object", "parse_index"]

_EMPTY_FIELD_NAME: Final = 56
_CONFLICTING_UPDATE_OPERATORS: Final = 40
_MAX_PADDING: Final = 1_500_000  # pathsupport::kMaxPaddingAllowed


def is_object(value: Any) -> bool:
    """Whether ``value`` is a BSON embedded document (a DBRef is one too)."""
    return isinstance(value, Mapping | DBRef)


def is_array(value: Any) -> bool:
    """Whether ``value`` is a BSON array."""
    return isinstance(value, list | tuple)


def parse_index(text: str) -> int | None:
    """``str::parseUnsignedBase10Integer``: ASCII digits only (leading zeros allowed)."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    index = int(text)
    return index if index < 2**64 else None


def apply_modifiers(document: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a ``$v: 1`` ``$set`` / ``$unset`` document; see the module docstring.

    Args:
        document: the pre-image; it is not modified.
        update: the oplog entry's ``o``.

    Returns:
        A new dict; documents and arrays on the updated paths are new, the rest are shared.

    Raises:
        TransformError: an operator other than ``$set`` / ``$unset``, an empty path part (56)
            or two paths where one contains the other (40).
    """
    leaves: list[tuple[tuple[str, ...], bool, Any]] = []
    for operator, fields in update.items():
        if operator == "$v":
            continue
        if operator not in ("$set", "$unset"):
            raise TransformError(
                f"expected a $v:1 update with only $set and $unset, got {operator!r}"
            )
        if not isinstance(fields, Mapping):
            raise TransformError(f"expected {operator} to be a document, got {fields!r}")
        for path, value in fields.items():
            parts = tuple(path.split("."))
            if not all(parts):
                raise TransformError(
                    f"expected a path without empty parts, got {path!r}", code=_EMPTY_FIELD_NAME
                )
            leaves.append((parts, operator == "$set", value))
    # Sorting whole paths part by part gives the tree's depth-first order.  Applying each leaf on
    # its own in that order matches the tree walk, because a path the server creates is usable
    # by the next sibling at once.
    leaves.sort(key=lambda leaf: leaf[0])
    for (shorter, _, _), (longer, _, _) in pairwise(leaves):
        if longer[: len(shorter)] == shorter:
            raise TransformError(
                f"expected no path to contain another, got {'.'.join(shorter)!r} and "
                f"{'.'.join(longer)!r}",
                code=_CONFLICTING_UPDATE_OPERATORS,
            )
    root = dict(document.items())
    owned: dict[int, Any] = {id(root): root}  # containers already copied (kept alive by the map)
    for parts, is_set, value in leaves:
        if is_set:
            _set(root, parts, value, owned)
        else:
            _unset(root, parts, owned)
    return root


def _own(value: Any, owned: dict[int, Any]) -> Any:
    """A private copy of a document or array (so the input is never mutated), or None."""
    if id(value) in owned:
        return value
    if isinstance(value, DBRef):
        copy: Any = dict(value.as_doc().items())
    elif isinstance(value, Mapping):
        copy = dict(value.items())
    elif is_array(value):
        copy = list(value)
    else:
        return None
    owned[id(copy)] = copy
    return copy


def _nest(parts: tuple[str, ...], value: Any) -> Any:
    for part in reversed(parts):
        value = {part: value}
    return value


def _set(root: dict[str, Any], parts: tuple[str, ...], value: Any, owned: dict[int, Any]) -> None:
    node: Any = root
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, dict):
            if part not in node:
                node[part] = _nest(parts[depth + 1 :], value)
                return
            key: Any = part
        else:
            index = parse_index(part)
            if index is None:
                return  # a field name inside an array: PathNotViable, skipped
            if index >= len(node):
                if index - len(node) > _MAX_PADDING:
                    raise TransformError(
                        f"expected at most {_MAX_PADDING} nulls of padding, got {part}"
                    )
                node.extend([None] * (index - len(node)))
                node.append(_nest(parts[depth + 1 :], value))
                return
            key = index
        if last:
            node[key] = value
            return
        child = _own(node[key], owned)
        if child is None:
            return  # a scalar in the way: PathNotViable, skipped
        node[key] = child
        node = child


def _unset(root: dict[str, Any], parts: tuple[str, ...], owned: dict[int, Any]) -> None:
    node: Any = root
    for depth, part in enumerate(parts):
        if isinstance(node, dict):
            if part not in node:
                return
            key: Any = part
        else:
            key = parse_index(part)
            if key is None or key >= len(node):
                return
        if depth == len(parts) - 1:
            if isinstance(node, dict):
                del node[key]
            else:
                node[key] = None  # $unset of an array element leaves a null in its place
            return
        child = _own(node[key], owned)
        if child is None:
            return
        node[key] = child
        node = child
