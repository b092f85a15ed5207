"""Helper: :func:`~shardstream.transform.update.apply_update.apply_update` on BSON bytes, in C
where that is certain.

The lakehouse's document state applies every update's diff to the stored document: decoding
both into Python values, applying the diff value by value and encoding the result costs far
more than the diff's few fields need.  The compiled applier (``_apply_diff.c``) walks the
document's BSON and the update's, copying the untouched elements' bytes and writing the
diff's values where ``doc_diff::applyDiff`` puts them (:mod:`.apply_update` says where).  It
takes a ``$v: 2`` delta only, and only bytes that ``bson_check`` vouches come back as
themselves through decode and encode, so its bytes are ``bson.encode(apply_update(
bson.decode(document), bson.decode(update)))``; anything else (a replacement, ``$v: 1``,
a ``b`` section, a malformed diff, a top-level ``_id`` it would have to move) it leaves to
that reference, which also raises the server's errors.  ``tests/transform/
test_apply_update_bson.py`` holds the two to each other on random documents and diffs.
"""

from __future__ import annotations

try:  # setup.py builds it; optional, as a C compiler may be missing
    from shardstream.transform.update._apply_diff import apply_diff as _apply_diff
except ImportError:  # pragma: no cover - tests/transform/test_apply_update_bson.py fails instead
    _apply_diff = None  # type: ignore[assignment]

__all__ = ["apply_update_bson", "available"]


def available() -> bool:
    """Whether the compiled applier was built."""
    return _apply_diff is not None


def apply_update_bson(document: bytes, update: bytes) -> bytes | None:
    """The BSON of ``document`` (BSON) after the update oplog entry's ``o`` (BSON), as
    encoding :func:`apply_update`'s result gives it; None where that reference must decide
    (or the applier was not built)."""
    if _apply_diff is None:
        return None
    return _apply_diff(document, update)
