"""EncodedEvent: the fast path's BSON decodes to the reference path's document exactly."""

from __future__ import annotations

import re
import struct
from typing import Any

import bson
import pytest
from bson.dbref import DBRef
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.merger.raw.encoded_event import EncodedEvent, decode_event, operation_type_of
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.transform import ChangeStreamOptions, transform_oplog
from shardstream.transform.field_list import FieldList
from shardstream.transform.raw.pipeline import FastShardPipeline
from tests import factories as make
from tests.paths import strict

T = [Timestamp(1_700_000_000, i) for i in range(1, 20)]
OID = ObjectId(b"\x02" * 12)
OPTIONS = ChangeStreamOptions(start_at_operation_time=T[0])

ENTRIES = {
    "insert": make.insert(T[1], {"_id": OID, "n": Int64(5), "at": make.WALL, "u": make.LSID}),
    "update": make.update(T[2], OID, {"u": {"n": 1}, "i": {"m": [1, {"x": 2}]}}),
    "repeated-u-and-i": make.update(T[3], OID, {"u": {"n": 1}, "i": {"n": 2}}),
    "repeated-dotted": make.update(T[4], OID, {"u": {"a.b": 1}, "sa": {"u": {"b": 2}}}),
    "repeated-regex-dbpointer": make.update(
        T[5],
        OID,
        {"u": {"r": Regex("^a", "i"), "p": DBRef("c", 1), "r2": re.compile("x")}, "i": {"r": 3}},
    ),
    "delete": make.delete(T[6], OID),
    "transaction": make.apply_ops(T[7], [make.inner(make.insert(T[7], {"_id": OID, "in": "txn"}))]),
}


def _both(entry: dict[str, Any]) -> tuple[list[EncodedEvent], list[dict[str, Any]]]:
    doc = bson.encode(entry)
    pipeline = FastShardPipeline(OPTIONS.with_options(merged_by_router=True), single_shard=False)
    pipeline.reference_events = []
    keys: list[bytes] = []
    events: list[bytes] = []
    pipeline.process_batch([doc], keys, events)
    assert not pipeline.reference_events, "expected the fast path to write this entry"
    fast = [EncodedEvent(raw, key, "s0") for key, raw in zip(keys, events, strict=True)]
    decoded = bson.decode(doc, codec_options=OPLOG_CODEC_OPTIONS)
    options = OPTIONS.with_options(merged_by_router=True)
    reference = [event.document for event in transform_oplog([decoded], options)]
    return fast, reference


@pytest.mark.parametrize("name", list(ENTRIES))
def test_a_fast_event_decodes_to_the_reference_document(name: str) -> None:
    fast, reference = _both(ENTRIES[name])
    assert len(fast) == len(reference) == 1
    event, expected = fast[0], reference[0]
    assert event.operation_type == expected["operationType"]
    assert strict(event.document) == strict(expected)
    assert event.token.to_document() == expected["_id"]
    assert event.token_data.cluster_time == expected["clusterTime"]


def test_repeated_updated_names_come_back_as_a_field_list() -> None:
    for name in ("repeated-u-and-i", "repeated-dotted", "repeated-regex-dbpointer"):
        fast, _ = _both(ENTRIES[name])
        assert isinstance(fast[0].document["updateDescription"]["updatedFields"], FieldList)
    fast, _ = _both(ENTRIES["update"])
    assert type(fast[0].document["updateDescription"]["updatedFields"]) is dict


def test_the_operation_type_is_found_after_session_fields() -> None:
    raw = bson.encode({"lsid": {"id": b"\x02operationType\x00"}, "operationType": "insert"})
    assert operation_type_of(raw) == "insert"
    with pytest.raises(ValueError, match="operationType"):
        operation_type_of(bson.encode({"x": 1}))


def test_the_walk_sizes_regexes_and_db_pointers() -> None:
    db_pointer = b"\x0cp\x00" + struct.pack("<i", 5) + b"db.c\x00" + b"\x01" * 12
    regex = b"\x0br\x00^a\x00i\x00"
    kind = b"\x02operationType\x00" + struct.pack("<i", 7) + b"insert\x00"
    body = db_pointer + regex + kind
    assert operation_type_of(struct.pack("<i", len(body) + 5) + body + b"\x00") == "insert"


def test_decoding_matches_bson_decode_without_an_update_description() -> None:
    raw = bson.encode({"_id": {"_data": "82"}, "operationType": "delete", "n": Int64(1)})
    assert strict(decode_event(raw)) == strict(bson.decode(raw, OPLOG_CODEC_OPTIONS))
