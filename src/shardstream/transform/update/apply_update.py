"""Helper: apply an update oplog entry's ``o`` to a document, exactly as mongod does.

Emulates ``doc_diff::applyDiff`` (src/mongo/db/update/document_diff_applier.cpp; the diff's
format is read by :mod:`.document_diff_reader`) for ``$v: 2`` deltas, ``ObjectReplaceExecutor``
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

from collections.abc import Mapping, Sequence
from typing import Any

from bson.binary import Binary

from shardstream.errors import TransformError
from shardstream.transform.update.apply_update_v1 import apply_modifiers, is_array, is_object
from shardstream.transform.update.document_diff_reader import (
    BINARY,
    DELETE,
    INSERT,
    SUBDIFF,
    UPDATE,
    ArrayDiff,
    DocumentDiff,
    as_document,
    diff_error,
)

__all__ = ["apply_update"]


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
        return _apply_to_document(as_document(document), DocumentDiff(as_document(diff)))
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


def _apply_to_document(pre: Mapping[str, Any], diff: DocumentDiff) -> dict[str, Any]:
    """DiffApplier::applyDiffToObject: one pass over the pre-image, then the appends."""
    table: dict[str, tuple[int, Any]] = {}
    appended: list[tuple[str, Any]] = []  # `u` fields first, then `i` (fieldsToInsert)

    def record(name: str, kind: int, payload: Any) -> None:
        if name in table:
            raise diff_error(
                4728000, f"expected each field once in a diff level, got {name!r} twice"
            )
        table[name] = (kind, payload)

    for name in diff.deletes:
        record(name, DELETE, None)
    for name, value in diff.updates:
        record(name, UPDATE, value)
        appended.append((name, value))
    for name, value in diff.binaries:
        record(name, BINARY, value)
    for name, child in diff.iter_subdiffs():
        record(name, SUBDIFF, child)
    for name, value in diff.inserts:
        # With mustCheckExistenceForInsertOperations false (as the post-image stage and oplog
        # application use it) an insert-only level would duplicate an existing field; a dict
        # cannot, so the field moves to the end like the checked path does.
        record(name, INSERT, value)
        appended.append((name, value))

    out: dict[str, Any] = {}
    written: set[str] = set()
    for name, value in pre.items():
        entry = table.get(name)
        if entry is None:
            out[name] = value
            continue
        kind, payload = entry
        if kind == UPDATE:
            out[name] = payload
            written.add(name)
        elif kind == SUBDIFF:
            out[name] = _apply_subdiff(value, payload)
        elif kind == BINARY:
            out[name] = _apply_binary(name, value, payload)
        # DELETE drops the field; INSERT drops it here and appends it below.
    for name, value in appended:
        if name not in written:
            out[name] = value
    return out


def _apply_subdiff(value: Any, child: DocumentDiff | ArrayDiff) -> Any:
    if isinstance(child, DocumentDiff) and is_object(value):
        return _apply_to_document(as_document(value), child)
    if isinstance(child, ArrayDiff) and is_array(value):
        return _apply_to_array(value, child)
    return None  # type mismatch: a later entry rewrites the field, so hold its place with null


def _apply_to_array(pre: Sequence[Any], diff: ArrayDiff) -> list[Any]:
    """DiffApplier::applyDiffToArray."""
    size = diff.new_size
    entries = diff.iter_entries()
    entry = next(entries, None)
    kept = len(pre) if size is None else min(len(pre), size)
    out: list[Any] = []
    for index in range(kept):
        if entry is not None and entry[0] == index:
            _, kind, payload = entry
            out.append(payload if kind == UPDATE else _apply_subdiff(pre[index], payload))
            entry = next(entries, None)
        else:
            out.append(pre[index])
    while len(out) < (size or 0) or entry is not None:
        if entry is not None and entry[0] == len(out):
            # A sub-diff past the end of the pre-image: null, as for a type mismatch.
            out.append(entry[2] if entry[1] == UPDATE else None)
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
    spec = as_document(spec) if is_object(spec) else {}
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
