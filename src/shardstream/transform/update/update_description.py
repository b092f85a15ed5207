"""``o.diff`` -> ``updateDescription``, emulating change_stream_document_diff_parser.cpp.

Walks ``o.diff`` depth first exactly as the server's parser does, with the
validation of ``DocumentDiffReader``/``ArrayDiffReader`` from
``update/document_diff_serialization.cpp``: the same traversal order, the same
dotted keys (repeats and odd dots included), the same ``disambiguatedPaths``, and
the same error codes raised at the same point of the walk. Values are copied
verbatim. 6.x's description of pre-5.0 modifier updates: ``legacy_update_description``.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any

from bson.dbref import DBRef
from bson.errors import InvalidBSON
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument

from shardstream.errors import TransformError
from shardstream.transform.field_list import FieldList, mapping_from_pairs

__all__ = ["is_object", "object_pairs", "parse_update_diff", "shown"]

_Part = str | int  # a field name, or an array index
_Pairs = list[tuple[str, Any]]

# Document diff sections and the rank that fixes their order (DocumentDiffReader).
_SECTION_RANK = {"d": 1, "u": 2, "i": 3, "b": 4, "s": 5}
_INT32_MAX = 2**31 - 1
_UINT32_MAX = 2**32 - 1
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60


def parse_update_diff(diff: Mapping[str, Any], *, with_disambiguated_paths: bool) -> dict[str, Any]:
    """Turn a ``$v:2`` oplog diff (``o.diff``) into the event's ``updateDescription``.

    Args:
        diff: the diff, a dict of BSON values or a ``RawBSONDocument``.
        with_disambiguated_paths: add ``disambiguatedPaths`` (expanded events, 6.1+).

    Returns:
        ``updatedFields`` (a dict, or a :class:`FieldList` when a key repeats),
        ``removedFields``, ``truncatedArrays`` and, when asked for,
        ``disambiguatedPaths`` (a dict or :class:`FieldList` too), in that order.

    Raises:
        TransformError: the diff is malformed; ``code`` is the server's error code.
    """
    if not is_object(diff):
        raise TransformError(
            f'expected entry field "o.diff" to be an object, got {shown(diff)}', code=40532
        )
    builder = _Builder()
    builder.document(object_pairs(diff, builder))
    description: dict[str, Any] = {
        "updatedFields": mapping_from_pairs(builder.updated),
        "removedFields": builder.removed,
        "truncatedArrays": builder.truncated,
    }
    if with_disambiguated_paths:
        description["disambiguatedPaths"] = mapping_from_pairs(builder.disambiguated)
    return description


class _Builder:
    """The current path while walking the diff, and what the walk has produced."""

    def __init__(self) -> None:
        self.path: list[_Part] = []
        self.ambiguous: list[bool] = []  # per path part: is the path ambiguous up to here
        self.updated: _Pairs = []
        self.removed: list[str] = []
        self.truncated: list[dict[str, Any]] = []
        self.disambiguated: list[tuple[str, list[_Part]]] = []

    def where(self) -> str:
        return f"path {self.dotted()!r}" if self.path else "the diff's root"

    def dotted(self) -> str:
        return ".".join(str(part) for part in self.path)

    def push(self, part: _Part) -> None:
        self.path.append(part)
        if self.ambiguous and self.ambiguous[-1]:
            ambiguous = True
        elif isinstance(part, int):
            ambiguous = False  # an index alone is never ambiguous: its type tells it apart
        else:
            # A numeric name is only ambiguous below the root, where it could be an index.
            ambiguous = (len(self.path) > 1 and _is_strict_numeric(part)) or "." in part
        self.ambiguous.append(ambiguous)

    def pop(self) -> None:
        self.path.pop()
        self.ambiguous.pop()

    def record(self) -> None:
        if not (self.ambiguous and self.ambiguous[-1]):
            return
        if any(isinstance(part, int) and part > _INT32_MAX for part in self.path):
            # The server converts indexes with std::stoi, which throws past INT_MAX.
            raise TransformError(
                f"expected array indexes of an ambiguous path to fit in an int32, got "
                f"{self.dotted()!r}"
            )
        self.disambiguated.append((self.dotted(), list(self.path)))

    def add_updated(self, part: _Part, value: Any) -> None:
        self.push(part)
        self.updated.append((self.dotted(), value))
        self.record()
        self.pop()

    def document(self, pairs: _Pairs) -> None:
        """Walk a document diff (the root, or an ``s<name>`` whose first field is not ``a``)."""
        if not pairs:
            raise _error(f"expected a non-empty diff at {self.where()}, got {{}}", 4770500)
        sections: dict[str, Any] = {}
        sub_diffs: _Pairs = []
        previous = ""
        for position, (name, value) in enumerate(pairs):
            if not name:
                raise _error(f"expected non-empty section names at {self.where()}, got ''", 4770505)
            kind = name[0]  # the server reads only the first character of a section name
            if kind not in _SECTION_RANK or (
                previous and _SECTION_RANK[kind] <= _SECTION_RANK[previous]
            ):
                after = f" after section {previous!r}" if previous else ""
                raise _error(
                    f"expected diff sections in the order d, u, i, b, s<field>... at "
                    f"{self.where()}, got section {name!r}{after}",
                    4770503,
                )
            if not is_object(value):
                raise _error(
                    f"expected section {name!r} at {self.where()} to be an object, got "
                    f"{shown(value)}",
                    4770507,
                )
            if kind == "s":
                sub_diffs = pairs[position:]
                break
            sections[kind] = value
            previous = kind
        for kind in "uib":
            for name, value in object_pairs(sections.get(kind), self):
                self.add_updated(name, value)
        for name, _ in object_pairs(sections.get("d"), self):
            self.push(name)
            self.removed.append(self.dotted())
            self.record()
            self.pop()
        for name, value in sub_diffs:
            if not name.startswith("s"):
                raise _error(
                    f"expected only s<field> sub-diffs after the first one at {self.where()}, "
                    f"got {name!r}",
                    4770514,
                )
            if not is_object(value):
                raise _error(
                    f"expected sub-diff {name!r} at {self.where()} to be an object, got "
                    f"{shown(value)}",
                    470510,
                )
            self.push(name[1:])
            self.sub_diff(value)
            self.pop()

    def sub_diff(self, value: Any) -> None:
        pairs = object_pairs(value, self)
        if pairs and pairs[0][0] == "a":
            self.array(pairs)
        else:
            self.document(pairs)

    def array(self, pairs: _Pairs) -> None:
        """Walk an array diff: ``a: true``, optional ``l: <int32>``, then ``u<i>``/``s<i>``."""
        header = pairs[0][1]
        if not isinstance(header, bool):
            raise _error(
                f"expected array diff header 'a' at {self.where()} to be a bool, got "
                f"{shown(header)}",
                4770519,
            )
        if not header:
            raise _error(f"expected array diff header 'a' at {self.where()} to be true", 4770520)
        entries = pairs[1:]
        if entries and entries[0][0] == "l":
            new_size = entries[0][1]
            if not _is_int32(new_size):
                raise _error(
                    f"expected the new size 'l' at {self.where()} to be an int32, got "
                    f"{shown(new_size)}",
                    4770507,
                )
            self.truncated.append({"field": self.dotted(), "newSize": int(new_size)})
            self.record()
            entries = entries[1:]
        for name, value in entries:
            if len(name) < 2:
                raise _error(
                    f"expected array diff entries named u<index> or s<index> at {self.where()}, "
                    f"got {name!r}",
                    4770521,
                )
            index = _array_index(name[1:])
            if index is None:
                raise _error(
                    f"expected an unsigned 32-bit decimal index in array diff entry {name!r} "
                    f"at {self.where()}",
                    4770512,
                )
            if name[0] == "u":
                self.add_updated(index, value)
            elif name[0] == "s":
                if not is_object(value):
                    raise _error(
                        f"expected sub-diff {name!r} at {self.where()} to be an object, got "
                        f"{shown(value)}",
                        4770501,
                    )
                self.push(index)
                self.sub_diff(value)
                self.pop()
            else:
                raise _error(
                    f"expected 'u' (update) or 's' (sub-diff) array diff entries at "
                    f"{self.where()}, got {name!r}",
                    4770502,
                )


def _error(message: str, code: int) -> TransformError:
    return TransformError(message, code=code)


def is_object(value: Any) -> bool:
    # pymongo decodes an object holding $ref and $id as a DBRef; it is still an object.
    return isinstance(value, Mapping | DBRef)


def object_pairs(value: Any, builder: _Builder | None) -> _Pairs:
    """Every field of an object in order, repeated names included (none for a non-object);
    ``builder`` says where a corrupt object lies (None: "the entry")."""
    if isinstance(value, DBRef):
        value = value.as_doc()
    if isinstance(value, RawBSONDocument):
        try:
            return list(FieldList.from_bson(value).items())
        except InvalidBSON as exc:
            where = builder.where() if builder is not None else "the entry"
            raise TransformError(f"expected valid BSON at {where}, got: {exc}") from exc
    if isinstance(value, Mapping):
        return list(value.items())
    return []


def _is_strict_numeric(name: str) -> bool:
    """``FieldRef::isNumericPathComponentStrict``: ASCII digits, no leading zero but "0"."""
    return name.isascii() and name.isdigit() and (name == "0" or name[0] != "0")


def _array_index(text: str) -> int | None:
    """``str::parseUnsignedBase10Integer``: ASCII digits only (leading zeros allowed), < 2**32."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > 10:
        return None
    index = int(text)
    return index if index <= _UINT32_MAX else None


def _is_int32(value: Any) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool | Int64)
        and -(2**31) <= value <= _INT32_MAX
    )


def shown(value: Any) -> str:
    """A value as an error message quotes it: its type and a short repr."""
    return f"{type(value).__name__} {_repr.repr(value)}"
