"""``sync_event``: a change event as the sync plans it, held to ``decode_event`` and to the
writes the sync plans from ``decode_event``'s dict.

Over real event bytes (the fast path's events for every transform vector, with its options
and with the sync's, and a seeded corpus: inserts, replaces, updates, deletes, transactions,
DDL, expanded events with ``collectionUUID``), ``sync_event`` must give ``decode_event``'s dict
without ``collectionUUID`` / ``wallTime``, with ``fullDocument`` as a :class:`SourceDocument`
of the exact bytes the event holds, and ``plan_event`` must plan the same writes, byte for
byte, from either dict.  Bytes the cut cannot take are decoded whole (the same dict);
malformed framing raises what ``decode_event`` raises.
"""

from __future__ import annotations

import datetime
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.codec_options import CodecOptions
from bson.errors import InvalidBSON
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.timestamp import Timestamp
from pymongo.operations import ReplaceOne

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange, plan_event
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.sync_event import SourceDocument, sync_event
from shardstream.errors import ShardstreamError
from shardstream.merger.raw.encoded_event import decode_event
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.event_writer import encode_event_document
from tests import factories as make
from tests.paths import as_read_from_file, strict
from tests.transform.raw_corpus import generate_entries
from tests.transform.vector_cases import fast_path_events

SYNC = ChangeStreamOptions(show_expanded_events=True, show_raw_update_description=True)
RAW_OPTIONS: CodecOptions[RawBSONDocument] = CodecOptions(document_class=RawBSONDocument)
NOT_DECODED = ("collectionUUID", "wallTime")
T = [Timestamp(1_700_000_000, i) for i in range(1, 4)]


def _events() -> list[bytes]:
    when = datetime.datetime(2026, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.UTC)
    typed = {"_id": ObjectId(bytes(12)), "when": when, "bin": Binary(bytes(16), 4), "d": {"x": []}}
    typed_run = as_read_from_file([make.insert(T[0], typed), make.insert(T[1], {"_id": 2})])
    corpora = [as_read_from_file(generate_entries(300, seed)) for seed in (11, 12)]
    return fast_path_events(SYNC, [typed_run, *corpora])


EVENTS = _events()


def _full_document_bytes(raw: bytes) -> bytes | None:
    """The fullDocument's bytes as pymongo's raw decoder finds them in the event."""
    value = bson.decode(raw, RAW_OPTIONS).get("fullDocument")
    return bytes(value.raw) if isinstance(value, RawBSONDocument) else None


def test_the_dict_is_decode_events_with_the_document_left_as_its_bytes() -> None:
    kinds: set[str] = set()
    documents = 0
    for raw in EVENTS:
        expected = decode_event(raw)
        for name in NOT_DECODED:
            expected.pop(name, None)
        got = sync_event(raw)
        assert not set(NOT_DECODED) & set(got)
        full, got_full = expected.pop("fullDocument", None), got.pop("fullDocument", None)
        assert strict(got) == strict(expected)
        kinds.add(expected["operationType"])
        if not isinstance(full, dict):
            assert got_full == full
            continue
        documents += 1
        assert type(got_full) is SourceDocument
        assert bytes(got_full.raw) == _full_document_bytes(raw)
        assert strict(bson.decode(got_full.raw, OPLOG_CODEC_OPTIONS)) == strict(full)
        assert list(got_full) == list(full)
    assert documents > 100
    assert {"insert", "replace", "update", "delete", "create", "rename", "drop"} <= kinds
    assert any("lsid" in decode_event(raw) for raw in EVENTS)
    assert any("collectionUUID" in decode_event(raw) for raw in EVENTS)


def test_a_documents_fields_read_as_the_events_do() -> None:
    raw = next(e for e in EVENTS if b"when\x00" in e)
    document = sync_event(raw)["fullDocument"]
    assert document["when"] == decode_event(raw)["fullDocument"]["when"]
    assert document["when"].tzinfo is not None
    assert document["bin"] == Binary(bytes(16), 4)
    assert type(document["d"]) is SourceDocument  # nested: raw until read
    assert document["d"]["x"] == []


@pytest.mark.parametrize(("document", "truthy"), [({"_id": 1}, True), ({}, False)])
def test_a_document_is_truthy_without_decoding(
    monkeypatch: pytest.MonkeyPatch, document: dict[str, Any], truthy: bool
) -> None:
    raw = encode_event_document(
        {"_id": {"_data": "82"}, "operationType": "insert", "fullDocument": document}
    )
    got = sync_event(raw)["fullDocument"]
    assert isinstance(got, SourceDocument)

    def refuse(*args: Any) -> Any:
        raise AssertionError("the document was decoded")

    monkeypatch.setattr("bson.raw_bson._inflate_bson", refuse)
    assert bool(got) is truthy
    model: ReplaceOne[Any] = ReplaceOne({"_id": 1}, got, upsert=True)  # pymongo asks bool() here
    monkeypatch.undo()
    # The command pymongo sends holds the same bytes as with the decoded document.
    decoded: ReplaceOne[Any] = ReplaceOne({"_id": 1}, dict(document), upsert=True)
    assert bson.encode({"q": model._filter, "u": model._doc}) == bson.encode(
        {"q": decoded._filter, "u": decoded._doc}
    )
    assert len(got) == len(document)  # decoding still works after


def _encoded(model: Any) -> bytes:
    return bson.encode({"q": model._filter, "u": getattr(model, "_doc", None)})


def _plan(event: dict[str, Any]) -> Any:
    try:
        return plan_event(event, NamespaceMap())
    except ShardstreamError as exc:
        return type(exc), str(exc)


def test_the_sync_plans_the_same_writes_from_either_dict() -> None:
    planned = transactions = ddl = refused = 0
    for raw in EVENTS:
        decoded = decode_event(raw)
        got, expected = _plan(sync_event(raw)), _plan(decoded)
        if isinstance(expected, CrudWrite):
            assert isinstance(got, CrudWrite)
            assert type(got.model) is type(expected.model)
            assert _encoded(got.model) == _encoded(expected.model)
            assert getattr(got.model, "_upsert", None) == getattr(expected.model, "_upsert", None)
            assert (got.target, got.route) == (expected.target, expected.route)
            assert got.transaction == expected.transaction
            assert strict((got.token, got.key)) == strict((expected.token, expected.key))
            if expected.document is not None:
                # nested, as pymongo and the conflict records send it (a top-level
                # encode would move a decoded dict's _id first)
                assert bson.encode({"d": got.document}) == bson.encode({"d": expected.document})
            planned += 1
            transactions += got.transaction is not None
            continue
        trimmed = {k: v for k, v in decoded.items() if k not in NOT_DECODED}
        if isinstance(expected, DdlChange):
            assert isinstance(got, DdlChange)
            assert strict(got.event) == strict(trimmed)
            ddl += 1
        elif expected is None:
            assert got is None
        else:  # the same refusal (its message lists the event's keys: without the two)
            assert got == _plan(trimmed)
            assert got[0] is expected[0]
            refused += 1
    assert planned > 100
    assert transactions > 10
    assert ddl > 10
    assert refused > 0


def _insert_event(**changes: Any) -> dict[str, Any]:
    raw = next(
        e
        for e in EVENTS
        if sync_event(e)["operationType"] == "insert" and b"\x05collectionUUID\x00" in e
    )
    return {**decode_event(raw), **changes}


@pytest.mark.parametrize(
    "changes",
    [
        {"fullDocument": None},  # null: decoded as it is
        {"fullDocument": "not a document"},
        {"pattern": Regex("^a", "i")},  # a top-level regex: not cut
    ],
)
def test_what_the_cut_leaves_is_decoded_whole(changes: dict[str, Any]) -> None:
    raw = bson.encode(_insert_event(**changes))
    assert strict(sync_event(raw)) == strict(decode_event(raw))
    assert "collectionUUID" in sync_event(raw)  # kept, as decode_event keeps it


def test_a_repeated_full_document_is_decoded_whole() -> None:
    raw = bson.encode(_insert_event(fullDocument={"_id": 1}))
    twice = raw[:-1] + b"\x03fullDocument\x00" + bson.encode({"_id": 2}) + b"\x00"
    twice = len(twice).to_bytes(4, "little") + twice[4:]
    assert sync_event(twice) == decode_event(twice)
    assert sync_event(twice)["fullDocument"] == {"_id": 2}  # the last, as a dict keeps


RAW = bson.encode(_insert_event(ns={"db": "zqz", "coll": "c"}))


@pytest.mark.parametrize(
    "damaged",
    [
        RAW[:-1],  # truncated
        RAW[:3],
        (len(RAW) + 1).to_bytes(4, "little") + RAW[4:],  # the length prefix disagrees
        RAW + b"\x00",
        RAW.replace(b"zqz", b"z\xffz"),  # bad UTF-8 in a field the cut leaves
        RAW.replace(b"\x02coll\x00", b"\x99coll\x00"),  # a type byte not BSON's, in ns
    ],
)
def test_malformed_bytes_raise_as_decode_event_raises(damaged: bytes) -> None:
    with pytest.raises(InvalidBSON):
        decode_event(damaged)
    with pytest.raises(InvalidBSON):
        sync_event(damaged)


@pytest.mark.parametrize("inside", ["fullDocument", "collectionUUID"])
def test_malformed_bytes_inside_a_cut_field_raise_as_decode_event_raises(inside: str) -> None:
    # The document it keeps as bytes is checked as the fast path checks what it copies,
    # and a collectionUUID that is not a binary is decoded: either way, decoded whole.
    value = {"s": "hello"} if inside == "fullDocument" else "hello"
    raw = bson.encode(_insert_event(**{inside: value})).replace(b"hello", b"h\xffllo")
    with pytest.raises(InvalidBSON):
        decode_event(raw)
    with pytest.raises(InvalidBSON):
        sync_event(raw)
