"""Sync: a change event decoded as the sync plans it, an insert's document left as its bytes.

The sync's planner (:mod:`.event_planner`) hands here each fast-path event's BSON that its
C walk left to Python, which decodes it, except:

* ``fullDocument`` stays the bytes it is, as a :class:`SourceDocument`: the target's
  replace-by-key upsert's statement holds those bytes as they came, where decoding the
  document and encoding it again was the largest cost of the sync's reading thread
  (``benchmarks/README.md``, "Less CPU per event").
  Those bytes are what the reference path would have decoded and encoded back unchanged:
  ``bson_check`` vouches for them here (as the fast path does for what it copies), and what
  it does not vouch for is decoded whole;
* ``collectionUUID`` and ``wallTime`` are not decoded at all (when a binary and a date, as
  the fast path writes them): no rule of the sync reads them.

Everything else is the dict :func:`~shardstream.merger.raw.encoded_event.decode_event` gives.
An event the cut cannot frame (see ``event_split``) is decoded whole, as before.
"""

from __future__ import annotations

from typing import Any, Final

from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from shardstream.merger.raw.encoded_event import decode_event
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.oplog.bson_depth import MAX_NESTING
from shardstream.transform.raw.bson_check import valid_entry
from shardstream.transform.raw.event_split import split_fields

_CUT: Final = ("fullDocument", "collectionUUID", "wallTime")
_DOCUMENT: Final = 0x03
_BINARY: Final = 0x05
_DATE: Final = 0x09
_NESTING: Final = MAX_NESTING - 1  # the document sits one level below the event's top


class SourceDocument(RawBSONDocument):
    """A source document as its BSON bytes; its fields decode on first read.

    Truthy without decoding: pymongo asks a replacement whether it is empty (``{}`` may
    replace), which on a :class:`~bson.raw_bson.RawBSONDocument` decodes its top level.
    """

    __slots__ = ()

    def __bool__(self) -> bool:
        return len(self.raw) > 5  # an empty document is 5 bytes


# Fields read from a SourceDocument decode as the event's other fields do (dates UTC-aware,
# binaries as they are), nested documents staying raw until read.
SOURCE_DOCUMENT_OPTIONS: Final[CodecOptions[RawBSONDocument]] = OPLOG_CODEC_OPTIONS.with_options(
    document_class=SourceDocument
)


def sync_event(raw: bytes) -> dict[str, Any]:
    """The event in ``raw`` as the sync plans it (see the module's doc).

    The document is checked as the fast path checks what it copies (``bson_check``, one
    pass in C): what that does not vouch for is decoded whole instead, so a corrupt
    document fails here as it would on the reference path.

    Raises:
        bson.errors.InvalidBSON: the event is not valid BSON (as :func:`decode_event`).
    """
    split = split_fields(raw, _CUT)
    if split is None:
        return decode_event(raw)
    rest, (document, uuid, wall) = split
    if (
        (
            document is not None
            and (document[0] != _DOCUMENT or not valid_entry(document[1], _NESTING))
        )
        or (uuid is not None and uuid[0] != _BINARY)
        or (wall is not None and wall[0] != _DATE)
    ):
        # Not what the fast path writes there (a null document, say): decoded whole, so
        # what is wrong with it fails here, as on the reference path.
        return decode_event(raw)
    event = decode_event(rest)
    if document is not None:
        event["fullDocument"] = SourceDocument(document[1], SOURCE_DOCUMENT_OPTIONS)
    return event
