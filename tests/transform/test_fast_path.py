"""The raw-BSON fast path against the reference pipeline, byte for byte.

Every transform vector (with its own options, and again with the default options
the fast path serves), seeded corpora that visit each fallback, and simulated
clusters: the fast path must give the same events, tokens, order and errors.
"""

from __future__ import annotations

import datetime
import random
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.event_writer import encode_event_document
from shardstream.transform.raw.pipeline import FastShardPipeline, fast_path_applies
from tests import factories as make
from tests.paths import as_read_from_file, fast_run, reference_run
from tests.transform.raw_corpus import generate_entries
from tests.transform.vector_cases import RAW_CASES, SKIPPED, oplog_entries, options_for

STREAM_CASES = [
    case
    for case in RAW_CASES
    if case["options"].get("kind") != "resumeTokenEncoding" and case["name"] not in SKIPPED
]


def _default_options_like(options: ChangeStreamOptions) -> ChangeStreamOptions:
    """The same scope and server version, every other option at its default."""
    return ChangeStreamOptions(
        db=options.db,
        coll=options.coll,
        server_version=options.server_version,
        merged_by_router=options.merged_by_router,
    )


def _assert_same(docs: list[bytes], options: ChangeStreamOptions) -> tuple[Any, Any]:
    expected = reference_run(docs, options)
    got, pipeline = fast_run(docs, options)
    assert got[2] == expected[2]  # the same error (class, message with ts), or none
    assert got[0] == expected[0]  # sort keys: token _data
    assert got[1] == expected[1]  # events, byte for byte
    return expected, pipeline


@pytest.mark.parametrize("case", STREAM_CASES, ids=[case["name"] for case in STREAM_CASES])
def test_every_vector_gives_the_reference_bytes(case: dict[str, Any]) -> None:
    docs = as_read_from_file(oplog_entries(case))
    options = options_for(case)
    _assert_same(docs, options)
    _assert_same(docs, _default_options_like(options))


def test_the_vectors_exercise_the_fast_path() -> None:
    fast = 0
    for case in STREAM_CASES:
        docs = as_read_from_file(oplog_entries(case))
        _, pipeline = _assert_same(docs, _default_options_like(options_for(case)))
        fast += pipeline.fast_entries
    assert fast >= 10  # most vectors are DDL, transactions and edge cases


SCOPES = [
    ChangeStreamOptions(),
    ChangeStreamOptions(db="shop"),
    ChangeStreamOptions(db="shop", coll="orders"),
    ChangeStreamOptions(show_system_events=True),
    ChangeStreamOptions(server_version=(6, 0)),
    ChangeStreamOptions(token_version=1),
    ChangeStreamOptions(server_version=(7, 0), merged_by_router=True),
    ChangeStreamOptions(start_at_operation_time=Timestamp(1_700_000_020, 3)),
    ChangeStreamOptions(show_expanded_events=True),
    ChangeStreamOptions(show_raw_update_description=True),
    ChangeStreamOptions(show_raw_update_description=True, server_version=(6, 0)),
    # the sync's options, and a db scope of them
    ChangeStreamOptions(show_expanded_events=True, show_raw_update_description=True),
    ChangeStreamOptions(db="shop", show_expanded_events=True, show_raw_update_description=True),
    ChangeStreamOptions(split_large_events=True),  # not fast: the reference alone
]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("options", SCOPES, ids=lambda options: repr(options)[19:80])
def test_seeded_corpora_give_the_reference_bytes(seed: int, options: ChangeStreamOptions) -> None:
    docs = as_read_from_file(generate_entries(400, seed))
    (_, events, error), pipeline = _assert_same(docs, options)
    assert error is None
    assert len(events) > 30
    if fast_path_applies(options):
        # Most entries take the fast path; each fallback branch is visited too. (Expanded
        # events with parsed descriptions send updates, with disambiguatedPaths, to the
        # reference: a third of the corpus.)
        parsed_expanded = options.show_expanded_events and not options.show_raw_update_description
        floor = pipeline.reference_entries // 2 if parsed_expanded else pipeline.reference_entries
        assert pipeline.fast_entries > floor
        assert pipeline.reference_entries > 20


@pytest.mark.parametrize("seed", [4, 5])
def test_simulated_shards_give_the_reference_bytes(seed: int) -> None:
    config = SimulationConfig(seed=seed, shards=2, operations=300)
    result = SimulatedCluster(config).run()
    for oplog in result.oplogs.values():
        docs = as_read_from_file(oplog)
        (_, events, error), pipeline = _assert_same(docs, ChangeStreamOptions())
        assert error is None
        assert events
        assert pipeline.fast_entries > 0


BROKEN_ENTRIES = {
    "no ui": {"op": "i", "ns": "shop.orders", "o": {"_id": 1}, "o2": {"_id": 1}},
    "no wall": {"op": "d", "ns": "shop.orders", "ui": None, "o": {"_id": ObjectId()}},
    "empty diff": {"op": "u", "ns": "shop.orders", "o": {"$v": 2, "diff": {}}},
    "double $v": {"op": "u", "ns": "shop.orders", "o": {"$v": 2.0, "diff": {"u": {"a": 1}}}},
    "$v 1 on 7.0+": {"op": "u", "ns": "shop.orders", "o": {"$set": {"a": 1}}},
    "unknown op": {"op": "x", "ns": "shop.orders", "o": {}},
}


@pytest.mark.parametrize("name", list(BROKEN_ENTRIES))
def test_a_broken_entry_fails_as_the_reference_fails(name: str) -> None:
    good = list(generate_entries(30, 9))
    broken = dict(BROKEN_ENTRIES[name])
    last = good[-1]["ts"]
    if name != "no ui":
        broken.setdefault("ui", good[-1].get("ui"))
    if broken.get("ui", 0) is None:
        del broken["ui"]
    broken.setdefault("o2", {"_id": ObjectId(b"k" * 12)})
    broken["ts"] = Timestamp(last.time + 1, 1)
    broken["t"] = Int64(1)
    if name != "no wall":
        broken["wall"] = good[-1]["wall"]
    (_, _, error), _ = _assert_same(as_read_from_file([*good, broken]), ChangeStreamOptions())
    assert error is not None
    assert "Timestamp(" in error


def test_a_corrupt_entry_is_reported_with_its_offset() -> None:
    docs = as_read_from_file(generate_entries(5, 1))
    corrupt = bytearray(bson.encode({"op": "i", "ns": "shop.orders", "x": "abc"}))
    corrupt[-2] = 0xFF  # the string's NUL is gone
    got, _ = fast_run([*docs, bytes(corrupt)], ChangeStreamOptions())
    assert got[2] is not None
    assert got[2].startswith("OplogError: corrupt BSON entry in <oplog> at byte ")
    assert f"at byte {sum(len(doc) for doc in docs)}:" in got[2]


DIFFS = {
    "set": {"u": {"a": 1, "b.c": "x"}},
    "set and add": {"u": {"a": 1}, "i": {"z": [1, 2]}},
    "add then set": {"i": {"z": 1}, "u": {"a": 1}},
    "repeated name": {"u": {"a": 1}, "i": {"a": 2}},
    "sub-document": {"u": {"a": 1}, "sx": {"u": {"y": 2}, "sz": {"i": {"w": None}}}},
    "array": {"sarr": {"a": True, "u0": 1, "u01": {"k": 2}, "s3": {"u": {"q": 1}}}},
    "nested arrays": {"sm": {"a": True, "s0": {"a": True, "u1": 5}}},
    "numeric field": {"s0": {"u": {"1": True}}},
    "truncation": {"sarr": {"a": True, "l": 2, "u0": 1}},
    "delete": {"d": {"gone": False}},
    "binary section": {"b": {"bin": 1}},
    "long section name": {"update": {"a": 1}},
    "huge index": {"sarr": {"a": True, "u4294967296": 1}},
    "array header false": {"sarr": {"a": False, "u0": 1}},
    "section after sub-diff": {"sx": {"u": {"y": 1}}, "u": {"a": 1}},
    "empty": {},
}


@pytest.mark.parametrize("name", list(DIFFS))
def test_update_diffs_give_the_reference_description(name: str) -> None:
    key = {"_id": ObjectId(b"u" * 12)}
    entry = {
        "op": "u",
        "ns": "shop.orders",
        "ui": Binary(bytes(range(16)), 4),
        "o": {"$v": 2, "diff": DIFFS[name]},
        "o2": key,
        "ts": Timestamp(1_700_000_000, 1),
        "t": Int64(1),
        "v": Int64(2),
        "wall": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    }
    _assert_same(as_read_from_file([entry]), ChangeStreamOptions())


def test_the_reference_encoder_keeps_fields_before_id() -> None:
    # pymongo would move a top-level _id first; a transaction's events put txnNumber first.
    document = {"txnNumber": Int64(1), "lsid": {"id": 1}, "_id": {"_data": "82"}, "x": 1}
    encoded = encode_event_document(document)
    assert list(bson.decode(encoded)) == ["txnNumber", "lsid", "_id", "x"]
    assert bson.decode(encoded) == document


def test_types_the_reference_decoder_folds_take_the_reference_path() -> None:
    # A Symbol (0x0E) in the document: pymongo decodes it to str and re-encodes a string
    # (0x02). One output per input (issue 25): the fast path's check (bson_check) does not
    # vouch for bytes the reference would not write back unchanged, so the entry takes the
    # reference path and both give the reference's event.
    entry = next(e for e in generate_entries(50, 1) if e["op"] == "i" and "o2" in e)
    entry = {**entry, "ns": "shop.orders", "o": {**entry["o"], "sym": "abc"}}
    doc = bytearray(bson.encode(entry))
    at = doc.index(b"\x02sym\x00")
    doc[at] = 0x0E
    (_, events, _), pipeline = fast_run([bytes(doc)], ChangeStreamOptions())
    (_, reference_events, _) = reference_run([bytes(doc)], ChangeStreamOptions())
    assert pipeline.fast_entries == 0
    assert b"\x02sym\x00" in reference_events[0]
    assert events == reference_events


def _decodes(doc: bytes) -> bool:
    try:
        bson.decode(doc)
    except (bson.errors.BSONError, ValueError, OverflowError):
        return False
    return True


@pytest.mark.parametrize("seed", range(40))
def test_a_damaged_entry_after_its_namespace_is_known_gives_the_reference_result(
    seed: int,
) -> None:
    """Templates are cached by the bytes before o: a later entry with those bytes but a
    damaged o, o2 or tail must still come out as the reference has it (or fail as it does)."""
    rng = random.Random(seed)
    docs = as_read_from_file(generate_entries(60, seed))
    at = rng.randrange(30, len(docs))
    damaged = bytearray(docs[at])
    for _ in range(rng.choice((1, 1, 2, 3))):
        position = rng.randrange(4, len(damaged) - 1)  # keep the length prefix: still framed
        damaged[position] = rng.choice((0, 1, 3, 0x7F, 0xFF, rng.randrange(256)))
    docs = [*docs[:at], bytes(damaged), *docs[at + 1 :]]
    options = ChangeStreamOptions()
    if all(_decodes(doc) for doc in docs):
        _assert_same(docs, options)
        return
    # The reference cannot decode it: the fast path reports the same entry, and what came
    # before it is the reference's stream of the entries before it.
    got, _ = fast_run(docs, options)
    expected = reference_run(docs[:at], options)
    if got[2] is not None and got[2].startswith("OplogError: corrupt BSON entry"):
        assert got[2].startswith(
            f"OplogError: corrupt BSON entry in <oplog> at byte {sum(map(len, docs[:at]))}:"
        )
        assert (got[0], got[1]) == (expected[0], expected[1])
    else:  # the fast path framed it without decoding: it must not have invented events
        assert got[0][: len(expected[0])] == expected[0]
        assert got[1][: len(expected[1])] == expected[1]


def test_the_entry_that_invalidates_is_checked_for_order_too() -> None:
    """A drop out of ts order fails the shard, as the reference's order check fails it."""
    t = [Timestamp(1700000000, i) for i in range(1, 6)]
    key = ObjectId()
    entries = [
        make.insert(t[0], {"_id": key, "a": 1}),
        make.insert(t[4], {"_id": ObjectId(), "a": 2}),
        make.command(t[2], "db", {"drop": "coll"}),  # before the insert at t[4]
    ]
    pipeline = FastShardPipeline(ChangeStreamOptions(db="db", coll="coll"), single_shard=False)
    with pytest.raises(OplogError, match="expected ts to increase"):
        pipeline.process_batch(as_read_from_file(entries), [], [], last=-1)


def _reordered_insert(ts: Timestamp) -> dict[str, Any]:
    """An insert whose fields are not in mongod's order: read from scan_entry's offsets."""
    entry = make.insert(ts, {"_id": ObjectId(), "a": 1})
    return {"ts": entry.pop("ts"), **entry}


@pytest.mark.parametrize("field", [b"\x02op\x00", b"\x02ns\x00"])
def test_a_string_without_its_terminator_is_left_to_the_reference(field: bytes) -> None:
    """Out of mongod's order the fields are framed by their lengths: a string's NUL must be
    where its length says, or the entry is not valid BSON and the reference reports it."""
    good = as_read_from_file([_reordered_insert(Timestamp(1700000000, 1))])[0]
    damaged = bytearray(good)
    at = good.index(field)
    size = int.from_bytes(good[at + 4 : at + 8], "little")
    damaged[at + 7 + size] = ord("x")
    got, pipeline = fast_run([good, bytes(damaged)], ChangeStreamOptions())
    assert pipeline.fast_entries == 1  # the good one
    assert got[2] is not None
    assert got[2].startswith("OplogError: corrupt BSON entry in <oplog> at byte ")


@pytest.mark.parametrize("size", [10, 300_000])
def test_inserts_without_o2_take_the_fast_path_with_the_reference_bytes(size: int) -> None:
    # Servers before 6.0 write no o2 on an insert. Such entries are framed by their lengths
    # (the layout match needs one); one whose document holds a field named o2 is matched
    # first and falls back alike.
    entries = []
    for n in range(4):
        entry = make.insert(Timestamp(1700000000, n + 1), {"_id": ObjectId(), "blob": "b" * size})
        del entry["o2"]
        entries.append(entry)
    entries[2]["o"]["o2"] = {"inner": True}
    _, pipeline = _assert_same(as_read_from_file(entries), ChangeStreamOptions())
    assert pipeline.fast_entries == len(entries)
