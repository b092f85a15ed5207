"""Helper: apply an update oplog entry's ``o`` to a document, exactly as mongod does.

Emulates ``doc_diff::applyDiff`` (src/mongo/db/update/document_diff_applier.cpp, reading the
format of document_diff_serialization.cpp) for ``$v: 2`` deltas, ``ObjectReplaceExecutor``
(object_replace_executor.cpp) for replacements, and, in :mod:`.apply_update_v1`, the modifier
path of ``UpdateDriver`` for pre-5.0 ``$v: 1`` entries.  Change streams use it the way
``document_source_change_stream_add_post_image.cpp`` does: to turn a pre-image into the
post-image for ``fullDocument: whenAvailable|required``.

Where fields land (a document level of a delta):

* unmodified, ``u`` and ``b`` fields and sub-diffs keep their place; ``d`` fields go;
* ``u`` fields the document lacks, then all ``i`` fields, are appended in diff order (an ``i``
  field that already exists is moved to the end);
* a sub-diff on a missing field does nothing; on a value of the wrong type it writes ``null``
  (the server assumes a later entry overwrites it).

An array diff keeps unmentioned elements, cuts the array to ``l``, pads with ``null`` up to an
index it writes past the end, and writes ``null`` for a sub-diff past the end or on the wrong
type.  Malformed diffs raise :class:`~shardstream.errors.TransformError` with the server's code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from bson.binary import Binary
from bson.dbref import DBRef

from shardstream.errors import TransformError
from shardstream.transform.update.apply_update_v1 import (
    apply_modifiers,
    is_array,
    is_object,
    parse_index,
)

__all__ = ["apply_update"]

# The reader's section letters and the order they must come in (DocumentDiffReader).
_SECTION_ORDER: Final = {"d": 1, "u": 2, "i": 3, "b": 4, "s": 5}
# Far beyond any array a 16 MB document can hold; stops a hostile `u<huge>` from eating memory.
_MAX_ARRAY_LENGTH: Final = 16 * 1024 * 1024

_DELETE, _UPDATE, _INSERT, _BINARY, _SUBDIFF = range(5)


def apply_update(document: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Return the document after applying an update oplog entry's ``o`` to it.

    Args:
        document: the pre-image (a dict or a ``RawBSONDocument``); it is not modified.
        update: the entry's ``o``: a ``$v: 2`` delta, a replacement (anything with ``_id``),
            or a pre-5.0 ``$set``/``$unset`` modifier document (``$v: 1`` or no ``$v``).

    Returns:
        A new dict; nested documents the update touched are new dicts, the rest are the
        input's own values.

    Raises:
        TransformError: ``update`` is malformed (``code`` is the server's, when known).
    """
    if "_id" in update:
        # The oplog logs the whole new document, so ObjectReplaceExecutor's result is `o`.
        return dict(update.items())
    version = _version(update.get("$v"))
    if version == 2:
        diff = update.get("diff")
        if not is_object(diff):
            raise TransformError(f"expected a $v:2 update to have an object 'diff', got {diff!r}")
        return _apply_to_document(_mapping(document), _DocumentDiff(_mapping(diff)))
    if version == 1:
        return apply_modifiers(document, update)
    raise TransformError(f"expected an update oplog entry with $v 1 or 2, got {update!r}")


def _version(value: Any) -> int:
    """``$v`` as BSONElement::numberInt() would read it; a missing ``$v`` means 1."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TransformError(f"expected '$v' to be a number, got {value!r}")
    return int(value) if value == value and abs(value) < 2**31 else 0


def _mapping(value: Any) -> Mapping[str, Any]:
    # A DBRef is an ordinary embedded document on the server.
    return value.as_doc() if isinstance(value, DBRef) else value


def _error(code: int, message: str) -> TransformError:
    return TransformError(message, code=code)


class _DocumentDiff:
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
            raise _error(4770500, "expected diff to be non-empty, got {}")
        previous = 0
        for position, (name, value) in enumerate(pairs):
            if not name:
                raise _error(4770505, f"expected diff section names to be non-empty in {diff!r}")
            # Only the first letter names a section, as in the server ("delta" reads as "d").
            order = _SECTION_ORDER.get(name[0], 0)
            if order <= previous:
                raise _error(
                    4770503,
                    f"expected sections d, u, i, b, s<field> in that order, got {name!r} "
                    f"in document diff {diff!r}",
                )
            if not is_object(value):
                raise _error(4770507, f"expected section {name!r} to be an object, got {value!r}")
            if order == _SECTION_ORDER["s"]:
                self.subdiffs = pairs[position:]
                break
            items = list(_mapping(value).items())
            if name[0] == "d":
                self.deletes = [field for field, _ in items]
            elif name[0] == "u":
                self.updates = items
            elif name[0] == "i":
                self.inserts = items
            else:
                self.binaries = items
            previous = order

    def iter_subdiffs(self) -> Iterator[tuple[str, _DocumentDiff | _ArrayDiff]]:
        """Yield ``(field, child)``; building a child checks its layout (nextSubDiff)."""
        for name, value in self.subdiffs:
            if not name.startswith("s"):
                raise _error(4770514, f"expected only s<field> sub-diffs after them, got {name!r}")
            if not is_object(value):
                raise _error(470510, f"expected sub-diff {name!r} to be an object, got {value!r}")
            yield name[1:], _read_subdiff(_mapping(value))


class _ArrayDiff:
    """An array diff: header ``a: true``, optional ``l``, then ``u<i>`` / ``s<i>`` entries."""

    __slots__ = ("entries", "new_size")

    def __init__(self, diff: Mapping[str, Any]) -> None:
        pairs = list(diff.items())
        header = pairs[0][1]
        if not isinstance(header, bool):
            raise _error(4770519, f"expected array header 'a' to be a bool, got {header!r}")
        if not header:
            raise _error(4770520, "expected array header 'a' to be true, got false")
        self.new_size: int | None = None
        self.entries = pairs[1:]
        if self.entries and self.entries[0][0] == "l":
            size = self.entries.pop(0)[1]
            if type(size) is not int or not -(2**31) <= size < 2**31:
                raise _error(4770507, f"expected section 'l' to be an int32, got {size!r}")
            if not 0 <= size <= _MAX_ARRAY_LENGTH:
                raise TransformError(f"expected array diff 'l' in [0, 2**24], got {size}")
            self.new_size = size

    def iter_entries(self) -> Iterator[tuple[int, int, Any]]:
        """Yield ``(index, _UPDATE or _SUBDIFF, payload)``, checked as ArrayDiffReader::next."""
        previous = -1
        limit = _MAX_ARRAY_LENGTH if self.new_size is None else self.new_size
        for name, value in self.entries:
            if len(name) < 2:
                raise _error(
                    4770521, f"expected an array diff entry u<index> or s<index>, got {name!r}"
                )
            index = parse_index(name[1:])
            if index is None:
                raise _error(
                    4770512, f"expected an integer index in array diff entry, got {name!r}"
                )
            if name[0] == "u":
                entry = (index, _UPDATE, value)
            elif name[0] == "s":
                if not is_object(value):
                    raise _error(
                        4770501, f"expected sub-diff {name!r} to be an object, got {value!r}"
                    )
                entry = (index, _SUBDIFF, _read_subdiff(_mapping(value)))
            else:
                raise _error(4770502, f"expected 'u' or 's' at index {index}, got {name!r}")
            # The server walks entries and elements together: an index out of order would make it
            # pad forever, one at or past `l` fails an invariant, so no valid diff has either.
            if index <= previous or index >= limit:
                raise TransformError(
                    f"expected increasing array diff indexes below {limit}, got {name!r}"
                )
            previous = index
            yield entry


def _read_subdiff(diff: Mapping[str, Any]) -> _DocumentDiff | _ArrayDiff:
    first = next(iter(diff), None)
    if first is None:
        raise _error(4770500, "expected diff to be non-empty, got {}")
    return _ArrayDiff(diff) if first == "a" else _DocumentDiff(diff)


def _apply_to_document(pre: Mapping[str, Any], diff: _DocumentDiff) -> dict[str, Any]:
    """DiffApplier::applyDiffToObject: one pass over the pre-image, then the appends."""
    table: dict[str, tuple[int, Any]] = {}
    appended: list[tuple[str, Any]] = []  # `u` fields first, then `i` (fieldsToInsert)

    def record(name: str, kind: int, payload: Any) -> None:
        if name in table:
            raise _error(4728000, f"expected each field once in a diff level, got {name!r} twice")
        table[name] = (kind, payload)

    for name in diff.deletes:
        record(name, _DELETE, None)
    for name, value in diff.updates:
        record(name, _UPDATE, value)
        appended.append((name, value))
    for name, value in diff.binaries:
        record(name, _BINARY, value)
    for name, child in diff.iter_subdiffs():
        record(name, _SUBDIFF, child)
    for name, value in diff.inserts:
        # With mustCheckExistenceForInsertOperations false (as the post-image stage and oplog
        # application use it) an insert-only level would duplicate an existing field; a dict
        # cannot, so the field moves to the end like the checked path does.
        record(name, _INSERT, value)
        appended.append((name, value))

    out: dict[str, Any] = {}
    written: set[str] = set()
    for name, value in pre.items():
        entry = table.get(name)
        if entry is None:
            out[name] = value
            continue
        kind, payload = entry
        if kind == _UPDATE:
            out[name] = payload
            written.add(name)
        elif kind == _SUBDIFF:
            out[name] = _apply_subdiff(value, payload)
        elif kind == _BINARY:
            out[name] = _apply_binary(name, value, payload)
        # _DELETE drops the field; _INSERT drops it here and appends it below.
    for name, value in appended:
        if name not in written:
            out[name] = value
    return out


def _apply_subdiff(value: Any, child: _DocumentDiff | _ArrayDiff) -> Any:
    if isinstance(child, _DocumentDiff) and is_object(value):
        return _apply_to_document(_mapping(value), child)
    if isinstance(child, _ArrayDiff) and is_array(value):
        return _apply_to_array(value, child)
    return None  # type mismatch: a later entry rewrites the field, so hold its place with null


def _apply_to_array(pre: Sequence[Any], diff: _ArrayDiff) -> list[Any]:
    """DiffApplier::applyDiffToArray."""
    size = diff.new_size
    entries = diff.iter_entries()
    entry = next(entries, None)
    kept = len(pre) if size is None else min(len(pre), size)
    out: list[Any] = []
    for index in range(kept):
        if entry is not None and entry[0] == index:
            _, kind, payload = entry
            out.append(payload if kind == _UPDATE else _apply_subdiff(pre[index], payload))
            entry = next(entries, None)
        else:
            out.append(pre[index])
    while len(out) < (size or 0) or entry is not None:
        if entry is not None and entry[0] == len(out):
            # A sub-diff past the end of the pre-image: null, as for a type mismatch.
            out.append(entry[2] if entry[1] == _UPDATE else None)
            entry = next(entries, None)
        else:
            out.append(None)  # padding up to an index written past the end, or up to `l`
    return out


def _apply_binary(name: str, value: Any, spec: Any) -> Any:
    """A ``b`` entry ``{o: offset, d: BinData}``: keep ``value[:o]`` and append ``d``.

    From document_diff_applier_test.cpp (Binary* tests); the newest applier itself was not in
    the stored sources.  An offset past the end leaves the value as it is (the test
    BinaryIsIdempotentMultipleWithShrink); a field of another type is rejected, not guessed.
    """
    spec = _mapping(spec) if is_object(spec) else {}
    offset, data = spec.get("o"), spec.get("d")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise TransformError(f"expected binary diff {name!r} offset 'o' >= 0, got {offset!r}")
    if not isinstance(data, bytes):
        raise TransformError(f"expected binary diff {name!r} data 'd' to be BinData, got {data!r}")
    if not isinstance(value, bytes):
        raise TransformError(
            f"expected field {name!r} to be BinData for a binary diff, got {value!r}"
        )
    if offset > len(value):
        return value
    patched = bytes(value[:offset]) + bytes(data)
    return Binary(patched, value.subtype) if isinstance(value, Binary) else patched
