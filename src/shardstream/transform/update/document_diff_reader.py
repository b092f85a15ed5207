"""Reading a ``$v: 2`` update's diff, its layout checked as the server's readers check it.

Emulates ``DocumentDiffReader`` and ``ArrayDiffReader`` (src/mongo/db/update/
document_diff_serialization.cpp): a document level's sections ``d``, ``u``, ``i``, ``b``
then ``s<field>`` sub-diffs, in that order; an array diff's header ``a: true``, optional
``l`` (its new length), then ``u<index>`` / ``s<index>`` entries in increasing order.  A
malformed diff raises :class:`~shardstream.errors.TransformError` with the server's code.
:mod:`.apply_update` applies what these read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from bson.dbref import DBRef

from shardstream.errors import TransformError
from shardstream.transform.update.apply_update_v1 import is_object, parse_index

# The reader's section letters and the order they must come in (DocumentDiffReader).
_SECTION_ORDER: Final = {"d": 1, "u": 2, "i": 3, "b": 4, "s": 5}
# Far beyond any array a 16 MB document can hold; stops a hostile `u<huge>` from eating memory.
MAX_ARRAY_LENGTH: Final = 16 * 1024 * 1024
# What an entry of a diff does to its field or element.
DELETE, UPDATE, INSERT, BINARY, SUBDIFF = range(5)


def as_document(value: Any) -> Mapping[str, Any]:
    """``value`` as a document (a DBRef is an ordinary embedded document on the server)."""
    return value.as_doc() if isinstance(value, DBRef) else value


def diff_error(code: int, message: str) -> TransformError:
    """A malformed diff's error, with the server's code."""
    return TransformError(message, code=code)


class DocumentDiff:
    """One document level of a diff, its section layout checked as DocumentDiffReader does."""

    __slots__ = ("binaries", "deletes", "inserts", "subdiffs", "updates")

    def __init__(self, diff: Mapping[str, Any]) -> None:
        self.deletes: list[str] = []
        self.updates: list[tuple[str, Any]] = []
        self.inserts: list[tuple[str, Any]] = []
        self.binaries: list[tuple[str, Any]] = []
        self.subdiffs: list[tuple[str, Any]] = []
        pairs = list(diff.items())
        if not pairs:
            raise diff_error(4770500, "expected diff to be non-empty, got {}")
        previous = 0
        for position, (name, value) in enumerate(pairs):
            if not name:
                raise diff_error(
                    4770505, f"expected diff section names to be non-empty in {diff!r}"
                )
            # Only the first letter names a section, as in the server ("delta" reads as "d").
            order = _SECTION_ORDER.get(name[0], 0)
            if order <= previous:
                raise diff_error(
                    4770503,
                    f"expected sections d, u, i, b, s<field> in that order, got {name!r} "
                    f"in document diff {diff!r}",
                )
            if not is_object(value):
                raise diff_error(
                    4770507, f"expected section {name!r} to be an object, got {value!r}"
                )
            if order == _SECTION_ORDER["s"]:
                self.subdiffs = pairs[position:]
                break
            items = list(as_document(value).items())
            if name[0] == "d":
                self.deletes = [field for field, _ in items]
            elif name[0] == "u":
                self.updates = items
            elif name[0] == "i":
                self.inserts = items
            else:
                self.binaries = items
            previous = order

    def iter_subdiffs(self) -> Iterator[tuple[str, DocumentDiff | ArrayDiff]]:
        """Yield ``(field, child)``; building a child checks its layout (nextSubDiff)."""
        for name, value in self.subdiffs:
            if not name.startswith("s"):
                raise diff_error(
                    4770514, f"expected only s<field> sub-diffs after them, got {name!r}"
                )
            if not is_object(value):
                raise diff_error(
                    470510, f"expected sub-diff {name!r} to be an object, got {value!r}"
                )
            yield name[1:], read_subdiff(as_document(value))


class ArrayDiff:
    """An array diff: header ``a: true``, optional ``l``, then ``u<i>`` / ``s<i>`` entries."""

    __slots__ = ("entries", "new_size")

    def __init__(self, diff: Mapping[str, Any]) -> None:
        pairs = list(diff.items())
        header = pairs[0][1]
        if not isinstance(header, bool):
            raise diff_error(4770519, f"expected array header 'a' to be a bool, got {header!r}")
        if not header:
            raise diff_error(4770520, "expected array header 'a' to be true, got false")
        self.new_size: int | None = None
        self.entries = pairs[1:]
        if self.entries and self.entries[0][0] == "l":
            size = self.entries.pop(0)[1]
            if type(size) is not int or not -(2**31) <= size < 2**31:
                raise diff_error(4770507, f"expected section 'l' to be an int32, got {size!r}")
            if not 0 <= size <= MAX_ARRAY_LENGTH:
                raise TransformError(f"expected array diff 'l' in [0, 2**24], got {size}")
            self.new_size = size

    def iter_entries(self) -> Iterator[tuple[int, int, Any]]:
        """Yield ``(index, UPDATE or SUBDIFF, payload)``, checked as ArrayDiffReader::next."""
        previous = -1
        limit = MAX_ARRAY_LENGTH if self.new_size is None else self.new_size
        for name, value in self.entries:
            if len(name) < 2:
                raise diff_error(
                    4770521, f"expected an array diff entry u<index> or s<index>, got {name!r}"
                )
            index = parse_index(name[1:])
            if index is None:
                raise diff_error(
                    4770512, f"expected an integer index in array diff entry, got {name!r}"
                )
            if name[0] == "u":
                entry = (index, UPDATE, value)
            elif name[0] == "s":
                if not is_object(value):
                    raise diff_error(
                        4770501, f"expected sub-diff {name!r} to be an object, got {value!r}"
                    )
                entry = (index, SUBDIFF, read_subdiff(as_document(value)))
            else:
                raise diff_error(4770502, f"expected 'u' or 's' at index {index}, got {name!r}")
            # The server walks entries and elements together: an index out of order would make it
            # pad forever, one at or past `l` fails an invariant, so no valid diff has either.
            if index <= previous or index >= limit:
                raise TransformError(
                    f"expected increasing array diff indexes below {limit}, got {name!r}"
                )
            previous = index
            yield entry


def read_subdiff(diff: Mapping[str, Any]) -> DocumentDiff | ArrayDiff:
    """A sub-diff as its reader: an array diff when it starts with ``a``."""
    first = next(iter(diff), None)
    if first is None:
        raise diff_error(4770500, "expected diff to be non-empty, got {}")
    return ArrayDiff(diff) if first == "a" else DocumentDiff(diff)
