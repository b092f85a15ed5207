"""Event transform rules per server version, each checked against the server source.

Sources: change_stream_event_transform.cpp (8.0 line 00587bf0, 6.x line 62d6f21d) and
change_stream_helpers_legacy.cpp (06447495).

The streams run on both paths (the ``path`` fixture, tests/paths.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from tests import factories as make
from tests.paths import OnPath

T = [Timestamp(1700000000, i) for i in range(20)]
COLL = ChangeStreamOptions(db="db", coll="coll")
DB = ChangeStreamOptions(db="db", show_expanded_events=True)


def _run(
    path: OnPath, entries: list[dict[str, Any]], options: ChangeStreamOptions = COLL
) -> list[ChangeEvent]:
    return path.transform(entries, options)


def _view_insert(view_on: Any = "base") -> dict[str, Any]:
    definition: dict[str, Any] = {"_id": "db.view", "pipeline": []}
    if view_on is not None:
        definition["viewOn"] = view_on
    return make.insert(T[1], definition, ns="db.system.views")


# 00587bf0 (8.0 line) writes nsType on create events and view creates; the manual marks the field
# "new in 8.0.5". 7.0 has no such field.
@pytest.mark.parametrize(("version", "has_ns_type"), [((7, 0), False), ((8, 0), True)])
def test_ns_type_is_written_from_8_0(
    path: OnPath, version: tuple[int, int], has_ns_type: bool
) -> None:
    options = DB.with_options(server_version=version)
    create = make.command(T[1], "db", {"create": "coll"})
    [event] = _run(path, [create], options)
    assert ("nsType" in event.document) is has_ns_type
    [view] = _run(path, [_view_insert()], options)
    assert view.document.get("nsType") == ("view" if has_ns_type else None)


# 00587bf0, determineCollectionType: a view definition without viewOn would be a collection,
# which the view transform asserts against (8814202).
def test_view_create_without_view_on_fails_from_8_0(path: OnPath) -> None:
    with pytest.raises(TransformError) as caught:
        _run(path, [_view_insert(view_on=None)], DB)
    assert caught.value.code == 8814202
    assert _run(path, [_view_insert(view_on=None)], DB.with_options(server_version=(7, 0)))


# 00587bf0, ChangeStreamViewDefinitionEventTransformation: wallTime is copied as is; a missing
# value is not written (the default transform, by contrast, requires a Date).
def test_view_event_without_wall_has_no_wall_time(path: OnPath) -> None:
    entry = _view_insert()
    del entry["wall"]
    [event] = _run(path, [entry], DB)
    assert "wallTime" not in event.document


def _new_shard() -> dict[str, Any]:
    o2 = {"migrateChunkToNewShard": "db.coll", "fromShardId": "a", "toShardId": "b"}
    return make.noop(T[1], o2, ns="db.coll")


# 62d6f21d + helpers_legacy 06447495: getNewShardDetectedOpName keeps "kNewShardDetected" for
# v1-token streams (marked for removal after the 7.0 branch); 00587bf0 always uses
# kNewShardDetectedOpType, "migrateChunkToNewShard".
@pytest.mark.parametrize(
    ("version", "name"), [((7, 0), "kNewShardDetected"), ((8, 0), "migrateChunkToNewShard")]
)
def test_new_shard_event_name_for_v1_token_streams(
    path: OnPath, version: tuple[int, int], name: str
) -> None:
    options = ChangeStreamOptions(merged_by_router=True, token_version=1, server_version=version)
    [event] = _run(path, [_new_shard()], options)
    assert event.operation_type == name


def _modifier_update(o: dict[str, Any]) -> dict[str, Any]:
    entry = make.update(T[1], 1, {})
    entry["o"] = o
    return entry


# 62d6f21d: with showRawUpdateDescription a pre-5.0 modifier update's rawUpdateDescription is
# the oplog's o as it is, not the converted description.
def test_legacy_modifier_update_raw_description_is_o_on_6_x(path: OnPath) -> None:
    o = {"$set": {"a": 1}, "$unset": {"b": True}}
    options = COLL.with_options(show_raw_update_description=True, server_version=(6, 0))
    [event] = _run(path, [_modifier_update(o)], options)
    assert event.document["rawUpdateDescription"] == o
    assert "updateDescription" not in event.document


# 00587bf0: `!oplogVersion.missing() || id.missing()` fails (6741200): a $v that is present but
# null fails even on a replacement; 6.x replaces anything holding an _id.
def test_present_but_null_v_fails_from_7_0(path: OnPath) -> None:
    entry = _modifier_update({"_id": 1, "$v": None, "a": 1})
    with pytest.raises(TransformError) as caught:
        _run(path, [entry], COLL.with_options(server_version=(7, 0)))
    assert caught.value.code == 6741200
    [event] = _run(path, [entry], COLL.with_options(server_version=(6, 0)))
    assert event.operation_type == "replace"


# 00587bf0: `oplogVersion.getInt() == 2` reads an int32; a double $v is not version 2.
def test_delta_update_needs_an_integer_v(path: OnPath) -> None:
    with pytest.raises(TransformError) as caught:
        _run(path, [_modifier_update({"$v": 2.0, "diff": {"u": {"a": 1}}})])
    assert caught.value.code == 6741200
    [event] = _run(path, [_modifier_update({"$v": Int64(2), "diff": {"u": {"a": 1}}})])
    assert event.operation_type == "update"


# 00587bf0: {indexes: oField.getField("indexes")} leaves a missing field out; it is never null.
def test_commit_index_build_without_indexes_has_an_empty_description(path: OnPath) -> None:
    entry = make.command(T[1], "db", {"commitIndexBuild": "coll", "indexBuildUUID": 1})
    [event] = _run(path, [entry], COLL.with_options(show_expanded_events=True))
    assert event.document["operationDescription"] == {}
