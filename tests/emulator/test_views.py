"""Emulator: views live in ``system.views``; their creation and drop are logged as that
collection's insert and delete, which a change stream reports as ``create`` and ``drop``."""

from __future__ import annotations

import bson
import pytest
from pymongo.errors import OperationFailure

from shardstream.emulator import EmulatedReplicaSet
from shardstream.transform import ChangeStreamOptions, transform_oplog

from .conftest import ClientFactory

PIPELINE = [{"$match": {"n": {"$gt": 1}}}]


def test_a_view_is_listed_and_logged_as_system_views_writes(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    db = client_factory(shard.uri).db
    db.command("create", "coll")
    db.command({"create": "big", "viewOn": "coll", "pipeline": PIPELINE})
    listed = {entry["name"]: entry for entry in db.list_collections()}
    assert listed["big"]["type"] == "view"
    assert listed["big"]["options"] == {"viewOn": "coll", "pipeline": PIPELINE}
    assert db.list_collection_names(filter={"type": "view"}) == ["big"]
    for command, code in (
        ({"create": "big", "viewOn": "coll"}, 48),  # exists
        ({"create": "coll", "viewOn": "other"}, 48),  # a collection's name
        ({"create": "v", "viewOn": ""}, 2),
        ({"create": "v", "viewOn": "coll", "pipeline": {}}, 14),
        ({"create": "v", "viewOn": "coll", "collation": {"locale": "fr"}}, 72),
    ):
        with pytest.raises(OperationFailure) as refused:
            db.command(command)
        assert refused.value.code == code
    db.drop_collection("big")
    assert db.list_collection_names(filter={"type": "view"}) == []

    entries = [bson.decode(entry.raw) for entry in shard.oplog.entries()]
    logged = [(e["op"], e["ns"]) for e in entries if e["ns"] == "db.system.views"]
    assert logged == [("i", "db.system.views"), ("d", "db.system.views")]
    options = ChangeStreamOptions(show_expanded_events=True)
    stream = [event.document for event in transform_oplog(entries, options)]
    events = [e for e in stream if e["ns"].get("coll") == "big"]
    assert [(e["operationType"], e["ns"]) for e in events] == [
        ("create", {"db": "db", "coll": "big"}),
        ("drop", {"db": "db", "coll": "big"}),
    ]
    assert events[0]["operationDescription"] == {"viewOn": "coll", "pipeline": PIPELINE}
