"""Mirror logic without Delta: events in token order against the rows they touch."""

from __future__ import annotations

import json
from typing import Any

import bson
import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from hypothesis import given, settings

from shardstream.errors import SinkError, TransformError
from shardstream.resume_token.token_json import loads
from shardstream.sim.apply_events import encoded_state
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.state import MirrorRow, apply_batch, batch_needs
from shardstream.spark.source.rows import event_to_row
from shardstream.transform.extended_json import event_to_json
from shardstream.transform.raw.extended_json import bson_to_json
from shardstream.transform.update.apply_update import apply_update
from tests.spark.lakehouse_checks import event_row, merged_events, simulate
from tests.strategies import document_keys


def _stored(db: str, coll: str, _id: Any, doc: dict[str, Any]) -> MirrorRow:
    key = event_to_json({"_id": _id})
    return MirrorRow(
        db=db,
        coll=coll,
        document_id=document_id(key),
        document_key=key,
        token="00",
        cluster_time={"t": 0, "i": 0},
        _text=event_to_json(doc),
    )


def _documents(rows: dict[Any, MirrorRow | None]) -> dict[Any, Any]:
    return {
        key: None if row is None else bson.encode(loads(row.full_document()))
        for key, row in rows.items()
    }


def test_update_applies_the_oplog_diff_keeping_order_and_types() -> None:
    stored = _stored("shop", "orders", 1, {"_id": 1, "a": Int64(5), "b": {"c": 1}, "d": 2})
    diff = {"u": {"a": Int64(6)}, "i": {"z.y": 1, "0": "n"}, "sb": {"d": {"c": True}}}
    changes = apply_batch([event_row("update", _id=1, diff=diff)], [stored])
    (row,) = changes.rows.values()
    assert row is not None
    expected = {"_id": 1, "a": Int64(6), "b": {}, "d": 2, "z.y": 1, "0": "n"}
    assert bson.encode(row.document()) == bson.encode(expected)
    assert list(row.document()) == ["_id", "a", "b", "d", "z.y", "0"]
    assert isinstance(row.document()["a"], Int64)


def test_insert_update_delete_in_one_batch_in_token_order() -> None:
    events = [
        event_row("insert", _id=1, doc={"_id": 1, "n": 1}),
        event_row("update", _id=1, diff={"u": {"n": 2}}),
        event_row("insert", _id=2, doc={"_id": 2}),
        event_row("delete", _id=2),
        event_row("replace", _id=3, doc={"_id": 3, "r": True}),
    ]
    changes = apply_batch(events, [])
    documents = _documents(changes.rows)
    key = ("shop", "orders")
    assert documents[(*key, document_id(events[0]["documentKey"]))] == bson.encode(
        {"_id": 1, "n": 2}
    )
    assert documents[(*key, document_id(events[2]["documentKey"]))] is None
    row3 = changes.rows[(*key, document_id(events[4]["documentKey"]))]
    assert row3 is not None
    assert row3.token == events[4]["_id"]
    assert row3.cluster_time == events[4]["clusterTime"]


def test_batch_needs_names_update_bases_and_ddl_scopes() -> None:
    events = [
        event_row("insert", _id=1, doc={"_id": 1}),
        event_row("update", _id=2, diff={"u": {"a": 1}}),
        event_row("drop", ns=("shop", "gone")),
        event_row("rename", ns=("shop", "a"), to=("shop", "b")),
        event_row("dropDatabase", ns=("old", None)),
    ]
    needs = batch_needs(events)
    assert needs.keys == {("shop", "orders", document_id(events[1]["documentKey"]))}
    assert needs.namespaces == {("shop", "gone"), ("shop", "a"), ("shop", "b")}
    assert needs.databases == {"old"}


def test_drop_rename_and_drop_database_act_on_their_rows() -> None:
    stored = [
        _stored("shop", "a", 1, {"_id": 1, "x": 1}),
        _stored("shop", "a", 2, {"_id": 2}),
        _stored("shop", "b", 1, {"_id": 1, "old": True}),
        _stored("shop", "c", 9, {"_id": 9}),
        _stored("old", "t", 5, {"_id": 5}),
    ]
    rename = event_row("rename", ns=("shop", "a"), to=("shop", "b"))
    events = [
        rename,
        event_row("update", ns=("shop", "b"), _id=1, diff={"u": {"x": 2}}),
        event_row("drop", ns=("shop", "c")),
        event_row("dropDatabase", ns=("old", None)),
    ]
    changes = apply_batch(events, stored)
    documents = _documents(changes.rows)
    one, two = document_id(event_to_json({"_id": 1})), document_id(event_to_json({"_id": 2}))
    assert documents[("shop", "a", one)] is None
    assert documents[("shop", "a", two)] is None
    assert documents[("shop", "b", one)] == bson.encode({"_id": 1, "x": 2})
    assert documents[("shop", "b", two)] == bson.encode({"_id": 2})
    assert changes.rows[("shop", "b", two)].token == rename["_id"]  # type: ignore[union-attr]
    assert documents[("shop", "c", document_id(event_to_json({"_id": 9})))] is None
    assert documents[("old", "t", document_id(event_to_json({"_id": 5})))] is None


def test_a_rename_seen_on_two_shards_acts_once() -> None:
    # mongos passes on a DDL event once per shard that saw it, with byte-identical tokens.
    stored = [_stored("shop", "a", 1, {"_id": 1})]
    rename = event_row("rename", ns=("shop", "a"), to=("shop", "b"))
    changes = apply_batch([rename, dict(rename)], stored)
    one = document_id(event_to_json({"_id": 1}))
    documents = _documents(changes.rows)
    assert documents[("shop", "b", one)] == bson.encode({"_id": 1})
    assert documents[("shop", "a", one)] is None


def test_update_of_an_unknown_document_is_refused_or_counted() -> None:
    event = event_row("update", _id=7, diff={"u": {"a": 1}})
    with pytest.raises(SinkError, match="expected the mirror to hold the document"):
        apply_batch([event], [])
    changes = apply_batch([event], [], strict=False)
    assert changes.rows == {}
    assert changes.unknown_updates == 1


def test_an_unknown_update_up_to_a_snapshots_read_end_is_counted_after_it_refused() -> None:
    # A snapshot may read a document after a later delete: its earlier updates find nothing.
    event = event_row("update", _id=7, diff={"u": {"a": 1}})
    at = (event["clusterTime"]["t"], event["clusterTime"]["i"])
    changes = apply_batch([event], [], snapshot_read_end=at)
    assert (changes.rows, changes.unknown_updates) == ({}, 1)
    with pytest.raises(SinkError, match="expected the mirror to hold the document"):
        apply_batch([event], [], snapshot_read_end=(at[0], at[1] - 1))


def test_split_event_fragments_are_refused_loudly() -> None:
    fragment = event_row("update", _id=1, fragment="update")
    with pytest.raises(SinkError, match="fragment of a split 'update' event"):
        batch_needs([fragment])
    with pytest.raises(SinkError, match="fragment"):
        apply_batch([fragment], [])


def test_bad_rows_name_what_was_expected() -> None:
    with pytest.raises(SinkError, match="expected documentKey as Extended JSON with an _id"):
        document_id('{"x": 1}')
    with pytest.raises(SinkError, match="expected a rename event's 'to'"):
        batch_needs([event_row("rename", ns=("shop", "a"))])
    stored = _stored("shop", "orders", 1, {"_id": 1})
    with pytest.raises(TransformError):
        apply_batch([event_row("update", _id=1, diff={"q": {}})], [stored])


def test_a_diff_with_deprecated_types_applies_as_its_extended_json_would() -> None:
    # The mirror's documents are json_util's text, where a Symbol is a string and
    # Undefined null; the diff's decoded values must give that same text.
    stored = _stored("shop", "orders", 1, {"_id": 1, "a": 1})
    event = event_row("update", _id=1, diff={"u": {"a": "s", "b": None}})
    raw = event["_oplogUpdate"]
    deprecated = raw.replace(b"\x02a\x00", b"\x0ea\x00").replace(b"\x0ab\x00", b"\x06b\x00")
    assert deprecated != raw
    (row,) = apply_batch([{**event, "_oplogUpdate": deprecated}], [stored]).rows.values()
    assert row is not None
    via_json = apply_update({"_id": 1, "a": 1}, loads(bson_to_json(deprecated)))
    assert (
        row.full_document()
        == event_to_json(via_json)
        == '{"_id": {"$numberInt": "1"}, "a": "s", "b": null}'
    )


def test_a_diff_column_that_is_not_bson_names_the_event() -> None:
    stored = _stored("shop", "orders", 1, {"_id": 1})
    event = event_row("update", _id=1, diff={"u": {"a": 1}})
    for bad, what in ((b"\x05\x00\x00", "not BSON"), ('{"u": {}}', "got '")):
        with pytest.raises(SinkError, match=f"_oplogUpdate.*{event['_id']}.*{what}"):
            apply_batch([{**event, "_oplogUpdate": bad}], [stored])


def test_a_simulated_stream_in_batches_rebuilds_the_reference_state() -> None:
    result = simulate(seed=11, operations=250)
    events = merged_events(result, seed=11)
    rows = [event_to_row(event) for event in events]
    stored: dict[Any, MirrorRow] = {}
    for start in range(0, len(rows), 37):
        batch = rows[start : start + 37]
        needs = batch_needs(batch)
        changes = apply_batch(batch, [stored[key] for key in needs.keys if key in stored])
        for key, row in changes.rows.items():
            if row is None:
                stored.pop(key, None)
            else:
                stored[key] = row
    got: dict[Any, dict[bytes, bytes]] = {}
    for row in stored.values():
        _id = loads(row.document_key)["_id"]
        got.setdefault((row.db, row.coll), {})[bson.encode({"_id": _id})] = bson.encode(
            loads(row.full_document())
        )
    assert got == encoded_state(result.final_state)


@settings(max_examples=300, deadline=None)
@given(key=document_keys())
def test_document_id_is_the_keys_id_as_compact_json(key: dict[str, Any]) -> None:
    # document_id rewrites the common {_id: {"$type": "..."}} text directly; every key,
    # that one included, must give what parsing and writing the _id gives.
    text = event_to_json(key)
    expected = json.dumps(json.loads(text)["_id"], separators=(",", ":"), ensure_ascii=False)
    assert document_id(text) == expected


@pytest.mark.parametrize(
    "value",
    [ObjectId("65a1b2c3d4e5f60718293a4b"), 7, Int64(-7), 1.5, float("-inf"), 'a"b', "é"],
)
def test_document_id_of_common_ids(value: Any) -> None:
    text = event_to_json({"_id": value})
    expected = json.dumps(json.loads(text)["_id"], separators=(",", ":"), ensure_ascii=False)
    assert document_id(text) == expected
