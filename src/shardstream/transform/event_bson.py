"""An event document's BSON: the bytes a client receives, in the event's own field order.

The reference pipeline's events are dicts; this is their one encoding, shared by the replay
writers, the fast path's byte-for-byte comparisons (``raw/event_writer.py`` re-exports it)
and the size check (:mod:`shardstream.transform.event_size_limit`), which keeps the bytes it
made on the event (``ChangeEvent.encoded``) so that a writer does not encode it twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.binary import UuidRepresentation
from bson.codec_options import CodecOptions

from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.field_list import FieldList

# uuid.UUID values (in some DDL events) encode as BinData subtype 4, as the server sends them.
EVENT_CODEC_OPTIONS: Final[CodecOptions[dict[str, Any]]] = CodecOptions(
    uuid_representation=UuidRepresentation.STANDARD
)


def encode_event_document(document: Mapping[str, Any]) -> bytes:
    """The reference BSON of an event document, in its field order, repeated names kept.

    pymongo's encoder moves ``_id`` to the front of a top-level document, but events
    put ``txnNumber``, ``lsid``, ``to`` and the like before it; so the event is encoded
    as the value of a wrapper field (nested documents keep their order) and cut out.
    A :class:`FieldList` only ever sits directly in ``updateDescription``
    (``updatedFields``, ``disambiguatedPaths``); pymongo's encoder would repeat the
    first value of a repeated name, so those are encoded pair by pair.
    """
    description = document.get("updateDescription")
    if isinstance(description, Mapping) and any(
        isinstance(part, FieldList) for part in description.values()
    ):
        document = {**document, "updateDescription": encodable_description(description)}
    wrapped = bson.encode({"e": document}, codec_options=EVENT_CODEC_OPTIONS)
    return wrapped[7:-1]  # int32 length, 0x03 "e" NUL ... the event ... NUL


def encodable_description(description: Mapping[str, Any]) -> dict[str, Any]:
    """``updateDescription`` with each FieldList as its raw BSON (every pair kept)."""
    return {
        name: part.to_raw_bson() if isinstance(part, FieldList) else part
        for name, part in description.items()
    }


def event_bson(event: ChangeEvent) -> bytes:
    """``event``'s BSON: the bytes the size check kept, else encoded now."""
    encoded = event.encoded
    return encoded if encoded is not None else encode_event_document(event.document)
