"""The largest oplog entry the server can write, and the readers' error for a larger one.

Every BSON document the server builds (``BSONObjBuilder::obj``) is capped by
``BSONObj::DefaultSizeTrait::MaxSize``, which is ``BSONObjMaxInternalSize``: the user's
16 MiB (``BSONObjMaxUserSize``) plus 16 KiB for the fields the server wraps around a
user document.  An oplog entry is such a document (``MutableOplogEntry::toBSON`` in
``repl::logOp``): a 16 MiB insert fits with its ``ts``, ``ns``, ``ui`` and ``wall``; a
larger entry cannot come from an oplog, and reading one back would fail the server's own
size check (``BSONObj::_assertInvalid``, BSONObjectTooLarge).  The readers refuse it by
its length prefix, before reading its body.
"""

from __future__ import annotations

from typing import Final

from shardstream.errors import OplogError

BSON_OBJ_MAX_USER_SIZE: Final = 16 * 1024 * 1024  # BSONObjMaxUserSize
BSON_OBJ_MAX_INTERNAL_SIZE: Final = BSON_OBJ_MAX_USER_SIZE + 16 * 1024  # BSONObjMaxInternalSize
MAX_OPLOG_ENTRY_SIZE: Final = BSON_OBJ_MAX_INTERNAL_SIZE


def oversized_entry(name: str, offset: int, size: int) -> OplogError:
    """The error for an entry in ``name`` at byte ``offset`` whose length prefix is ``size``."""
    return OplogError(
        f"oversized oplog entry in {name} at byte {offset}: expected at most "
        f"{MAX_OPLOG_ENTRY_SIZE} bytes (BSONObjMaxInternalSize), got a length of {size}"
    )


def oversized_json_entry(name: str, line_number: int, size: int) -> OplogError:
    """The error for an Extended JSON entry whose BSON would be ``size`` bytes."""
    return OplogError(
        f"oversized oplog entry in {name} line {line_number}: expected at most "
        f"{MAX_OPLOG_ENTRY_SIZE} bytes (BSONObjMaxInternalSize) as BSON, got {size}"
    )


def json_entry_may_be_oversized(text: str) -> bool:
    """Whether an Extended JSON line is long enough that its BSON may pass the limit.

    BSON takes at most ~6.5 bytes per character of JSON (``[1,1,...]``: two characters
    an element, 13 bytes as an array element with a 7-digit name); a line shorter than an
    eighth of the limit cannot reach it, and is not encoded to be measured.
    """
    return len(text) > MAX_OPLOG_ENTRY_SIZE // 8
