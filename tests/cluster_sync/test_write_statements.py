"""Write statements planned in C from an event's bytes, held to the Python planner.

``EventPlanner`` plans a fast-path event from its bytes in C (``_write_statements.c``, its
update pipelines in ``_update_pipeline.c``) where it can and falls back to decoding it and
``apply_rules.plan_event`` otherwise.  The two must agree byte for byte: over the fast path's
events for every transform vector and seeded corpora (inserts, replaces, updates with
sub-diffs, deletes, transactions, DDL), over drawn diffs of every section and depth, and over
events the C walk must leave to Python (it then answers None, and the Python planner gives
the write or the error).
"""

from __future__ import annotations

import datetime
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.event_planner import EventPlanner, PlannedEvent
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.write_statements import CompiledPlan, compiled_statement
from shardstream.transform import ChangeStreamOptions
from tests.cluster_sync.test_diff_to_pipeline import DOCUMENTS, document_diffs
from tests.paths import as_read_from_file, fast_run
from tests.transform.raw_corpus import generate_entries
from tests.transform.vector_cases import fast_path_events

SYNC = ChangeStreamOptions(show_expanded_events=True, show_raw_update_description=True)
T = [Timestamp(1_700_000_000, i) for i in range(1, 4)]
WALL = datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC)

pytestmark = pytest.mark.skipif(
    compiled_statement is None, reason="shardstream was installed without its C extensions"
)


def _compiled(raw: bytes) -> CompiledPlan | None:
    assert compiled_statement is not None  # the module is skipped without it
    return compiled_statement(raw)


def _fields(planned: PlannedEvent) -> tuple[Any, ...]:
    time, token, transaction, item = planned
    if isinstance(item, CrudWrite):
        parts: Any = (item.target, item.route, item.statement, item.kind, item.token)
        return time, token, transaction, (*parts, item.transaction)
    return time, token, transaction, item


def _planned_both_ways(raw: bytes) -> tuple[Any, Any]:
    """(the C planner's fields or the error it raised, the Python planner's)."""
    results = []
    for compiled in (True, False):
        try:
            results.append(_fields(EventPlanner(NamespaceMap(), compiled=compiled).raw(raw)))
        except Exception as exc:  # the same error either way
            results.append((type(exc), str(exc)))
    return results[0], results[1]


def test_every_fast_path_event_is_planned_alike() -> None:
    # Every vector under its own options and the sync's, and seeded corpora: the C walk
    # takes most, leaves the rest (updateDescription without the raw one, a key without
    # _id, ...) to the Python planner, and both give the same write or the same error.
    corpora = [as_read_from_file(generate_entries(300, seed)) for seed in (21, 22, 23)]
    for raw in fast_path_events(SYNC, corpora):
        in_compiled, in_python = _planned_both_ways(raw)
        assert in_compiled == in_python


def test_every_crud_event_of_a_corpus_is_planned_in_c() -> None:
    corpora = [as_read_from_file(generate_entries(300, seed)) for seed in (31, 32)]
    events = [raw for docs in corpora for raw in fast_run(docs, SYNC)[0][1]]
    crud = [raw for raw in events if bson.decode(raw)["operationType"] in _CRUD]
    assert len(crud) > 100
    assert all(_compiled(raw) is not None for raw in crud)


_CRUD = ("insert", "replace", "update", "delete")


def _update_event(diff: Any) -> bytes:
    """An update event laid out as the fast path writes it."""
    return _event({"operationType": "update", "rawUpdateDescription": {"$v": 2, "diff": diff}})


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS.flatmap(document_diffs))
def test_a_drawn_diff_gives_the_python_pipeline_byte_for_byte(diff: dict[str, Any]) -> None:
    raw = _update_event(diff)
    in_compiled, in_python = _planned_both_ways(raw)
    assert in_compiled == in_python


@pytest.mark.parametrize(
    ("diff", "in_c"),
    [
        ({"u": {"$odd": 1, "dot.ted": {"$set": "$x"}, "": None}}, True),  # names as constants
        ({"i": {"a": 1}, "d": {"b": False}, "u": {"c": 2}}, True),  # i's fields go last
        ({"sa": {"a": True, "l": 0}}, True),  # an array cut to nothing
        ({"sa": {"a": True, "l": Int64(3), "u5": 1, "s1": {"u": {"x": 1}}}}, True),
        ({"s": {"u": {"x": 1}}}, True),  # a sub-diff of the field named ""
        ({"dx": {"a": False}}, False),  # read as "d" by the Python walk: left to it
        ({"sa": {"a": True, "u01x": 1}}, False),  # refused by the Python walk
        ({"sa": {"a": True, "l": 2.0}}, False),  # int() of a double: left to Python
        ({"sa": {"a": True, "u1_0": 1}}, False),  # int() reads "1_0" as 10: left to Python
        ({"": {"a": 1}}, False),  # no section: refused by the Python walk
        ({"b": {"a": {"o": 0, "d": b"x"}}}, False),  # a binary diff: refused by name
        ({"u": []}, False),  # a section that is not a document
    ],
)
def test_a_diff_the_c_walk_may_not_read_is_left_to_python(diff: Any, in_c: bool) -> None:
    raw = _update_event(diff)
    assert (_compiled(raw) is not None) is in_c
    in_compiled, in_python = _planned_both_ways(raw)
    assert in_compiled == in_python


@pytest.mark.parametrize("version", [2, Int64(2), 2.0])
def test_a_diff_of_version_2_in_any_numeric_type_is_planned_in_c(version: Any) -> None:
    # apply_rules compares $v with == 2: an int64 (as some servers write it) or a double too.
    event = bson.decode(_update_event({"u": {"a": 1}}))
    raw = bson.encode({**event, "rawUpdateDescription": {"$v": version, "diff": {"u": {"a": 1}}}})
    assert _compiled(raw) is not None
    in_compiled, in_python = _planned_both_ways(raw)
    assert in_compiled == in_python


@pytest.mark.parametrize(
    "event",
    [
        {"operationType": "insert", "fullDocument": {"_id": 1, "s": bson.SON()}},
        {"operationType": "delete", "lsid": {"id": Binary(bytes(16), 4)}, "txnNumber": Int64(9)},
        {"operationType": "delete", "lsid": None, "txnNumber": Int64(9)},  # not in one
        {"operationType": "delete", "documentKey": {"_id": "text", "region": "eu"}},
        {"operationType": "delete", "documentKey": {"_id": {"nested": [1, 2]}}},
        {"operationType": "replace", "fullDocument": {"_id": 1}, "documentKey": {"_id": 1.5}},
    ],
)
def test_crud_events_are_planned_in_c_as_in_python(event: dict[str, Any]) -> None:
    raw = _event(event)
    assert _compiled(raw) is not None
    in_compiled, in_python = _planned_both_ways(raw)
    assert in_compiled == in_python


@pytest.mark.parametrize(
    "event",
    [
        {"operationType": "insert"},  # no fullDocument: Python names what is missing
        {"operationType": "insert", "fullDocument": None},
        {"operationType": "delete", "documentKey": {"region": "eu"}},  # no _id
        {"operationType": "delete", "documentKey": "k"},
        {"operationType": "delete", "_id": {"_data": "82", "extra": 1}},  # not a plain token
        {"operationType": "delete", "clusterTime": 5},
        {"operationType": "delete", "lsid": "s", "txnNumber": Int64(1)},
        {"operationType": "delete", "lsid": {"id": 1}, "txnNumber": 1.0},
        {"operationType": "delete", "ns": {"db": "shop", "coll": 7}},
        {"operationType": "delete\x00x"},  # a type with a NUL in it: not "delete"
        {"operationType": "drop"},  # DDL: the Python planner's
        {"operationType": "update", "rawUpdateDescription": {"$v": 1, "$set": {"a": 1}}},
        {"operationType": "update", "rawUpdateDescription": {"$v": "2", "diff": {}}},
    ],
)
def test_events_the_c_walk_does_not_vouch_for_are_left_to_python(event: dict[str, Any]) -> None:
    raw = _event(event)
    assert _compiled(raw) is None
    in_compiled, in_python = _planned_both_ways(raw)
    assert in_compiled == in_python


def test_a_document_key_of_another_type_than_an_object_id_routes_as_python_does() -> None:
    key = {"_id": {"a": [1, "x"]}}
    raw = _event({"operationType": "delete", "documentKey": key})
    plan = _compiled(raw)
    assert plan is not None
    assert plan[3] == bson.encode(key)
    oid = ObjectId()
    plan = _compiled(_event({"operationType": "delete", "documentKey": {"_id": oid}}))
    assert plan is not None
    assert plan[3] == b"\x07" + oid.binary


def test_a_symbol_in_the_document_is_not_vouched_for() -> None:
    # bson_check refuses what decodes to another type (a symbol comes back a string).
    document = bson.encode({"_id": 1})[:-1] + b"\x0es\x00\x02\x00\x00\x00x\x00\x00"
    document = len(document).to_bytes(4, "little") + document[4:]
    event = bson.decode(_event({"operationType": "insert"}))
    raw = bson.encode(event)[:-1] + b"\x03fullDocument\x00" + document + b"\x00"
    raw = len(raw).to_bytes(4, "little") + raw[4:]
    assert _compiled(raw) is None


def _event(fields: dict[str, Any]) -> bytes:
    base: dict[str, Any] = {
        "_id": {"_data": "8265530000000000012B"},
        "operationType": "delete",
        "clusterTime": T[1],
        "wallTime": WALL,
        "ns": {"db": "shop", "coll": "orders"},
        "documentKey": {"_id": 1},
    }
    base.update(fields)
    if fields.get("operationType") == "replace" and "fullDocument" not in fields:
        base["fullDocument"] = {"_id": 1}
    return bson.encode(base)


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**32 - 1))
def test_the_cluster_time_is_one_int_that_sorts_as_the_timestamp(seconds: int, inc: int) -> None:
    raw = _event({"clusterTime": Timestamp(seconds, inc)})
    plan = _compiled(raw)
    assert plan is not None
    assert plan[6] == (seconds << 32) | inc
    assert EventPlanner(NamespaceMap(), compiled=False).raw(raw)[0] == plan[6]


def test_an_event_out_of_scope_plans_no_write_but_keeps_its_place() -> None:
    raw = _event({"ns": {"db": "other", "coll": "x"}})
    assert _compiled(raw) is not None
    time, token, transaction, item = EventPlanner(NamespaceMap(db="shop")).raw(raw)
    assert item is None
    assert transaction is None
    assert token == {"_data": "8265530000000000012B"}
    assert time == (T[1].time << 32) | T[1].inc
