"""Emulator: real pymongo runs DDL and catalog commands; each change is logged as on mongod."""

from __future__ import annotations

from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.int64 import Int64
from pymongo import ASCENDING, IndexModel
from pymongo.database import Database
from pymongo.errors import OperationFailure

from shardstream.emulator import EmulatedReplicaSet

from .conftest import ClientFactory

ID_INDEX = {"v": 2, "key": {"_id": 1}, "name": "_id_"}


def _db(client_factory: ClientFactory, shard: EmulatedReplicaSet) -> Database[Any]:
    return client_factory(shard.uri).db


def _commands(shard: EmulatedReplicaSet) -> list[dict[str, Any]]:
    """The command entries logged so far, decoded."""
    entries = [bson.decode(entry.raw) for entry in shard.oplog.entries()]
    return [entry for entry in entries if entry["op"] == "c"]


def test_create_stores_options_and_lists_them(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    db = _db(client_factory, shard)
    validator = {"a": {"$exists": True}}
    db.command("create", "coll", validator=validator, validationLevel="moderate")
    with pytest.raises(OperationFailure) as exists:
        db.command("create", "coll")
    assert exists.value.code == 48
    (create,) = _commands(shard)
    assert create["ns"] == "db.$cmd"
    assert create["o"] == {
        "create": "coll",
        "validator": validator,
        "validationLevel": "moderate",
        "idIndex": ID_INDEX,
    }
    (listed,) = db.list_collections()
    assert listed == {
        "name": "coll",
        "type": "collection",
        "options": {"validator": validator, "validationLevel": "moderate"},
        "info": {"readOnly": False, "uuid": create["ui"]},
        "idIndex": ID_INDEX,
    }
    db.create_collection("other")
    assert db.list_collection_names(filter={"name": "other"}) == ["other"]
    assert sorted(db.list_collection_names()) == ["coll", "other"]


def test_drop_logs_the_record_count_and_a_missing_drop_succeeds(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    db = _db(client_factory, shard)
    db.coll.insert_many([{"_id": 1}, {"_id": 2}])
    db.drop_collection("coll")
    db.drop_collection("never")  # mongod 7.0: not an error
    drop = _commands(shard)[-1]
    assert (drop["o"], drop["o2"]) == ({"drop": "coll"}, {"numRecords": Int64(2)})
    assert list(drop) == ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]
    assert db.list_collection_names() == []
    db.coll.insert_one({"_id": 1})  # re-created with a new UUID
    assert _commands(shard)[-1]["ui"] != drop["ui"]


def test_rename_within_a_database(shard: EmulatedReplicaSet, client_factory: ClientFactory) -> None:
    db = _db(client_factory, shard)
    db.a.insert_one({"_id": 1})
    db.b.insert_one({"_id": 2})
    with pytest.raises(OperationFailure) as exists:
        db.a.rename("b")
    assert exists.value.code == 48
    a_uuid, b_uuid = (entry["ui"] for entry in _commands(shard))
    db.a.rename("b", dropTarget=True)
    rename = _commands(shard)[-1]
    assert (rename["ns"], rename["ui"]) == ("db.$cmd", a_uuid)
    assert rename["o"] == {
        "renameCollection": "db.a",
        "to": "db.b",
        "stayTemp": False,
        "dropTarget": b_uuid,
    }
    assert rename["o2"] == {"numRecords": Int64(1)}
    assert list(db.b.find()) == [{"_id": 1}]
    db.b.rename("c")
    assert _commands(shard)[-1]["o"] == {
        "renameCollection": "db.b",
        "to": "db.c",
        "stayTemp": False,
    }
    with pytest.raises(OperationFailure) as missing:
        db.a.rename("d")
    assert missing.value.code == 26
    with pytest.raises(OperationFailure) as across:
        db.client.admin.command("renameCollection", "db.c", to="other.c")
    assert across.value.code == 20


def test_coll_mod_merges_options_and_changes_an_index(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    db = _db(client_factory, shard)
    db.command("create", "coll", validationLevel="strict")
    db.coll.create_index("status")
    db.command("collMod", "coll", validator={"s": {"$exists": True}}, validationAction="warn")
    reply = db.command("collMod", "coll", index={"keyPattern": {"status": 1}, "hidden": True})
    assert (reply["hidden_old"], reply["hidden_new"]) == (False, True)
    options, index = _commands(shard)[-2:]
    assert options["o"] == {
        "collMod": "coll",
        "validator": {"s": {"$exists": True}},
        "validationAction": "warn",
    }
    assert options["o2"] == {
        "collectionOptions_old": {"uuid": options["ui"], "validationLevel": "strict"}
    }
    assert index["o"] == {"collMod": "coll", "index": {"name": "status_1", "hidden": True}}
    assert index["o2"]["indexOptions_old"] == {"hidden": False}
    (listed,) = db.list_collections()
    assert listed["options"] == {
        "validationLevel": "strict",
        "validator": {"s": {"$exists": True}},
        "validationAction": "warn",
    }
    assert db.coll.index_information()["status_1"]["hidden"] is True
    with pytest.raises(OperationFailure) as unknown:
        db.command("collMod", "coll", capped=True)
    assert unknown.value.code == 72
    with pytest.raises(OperationFailure) as missing:
        db.command("collMod", "missing", validationLevel="off")
    assert missing.value.code == 26


def test_create_indexes(shard: EmulatedReplicaSet, client_factory: ClientFactory) -> None:
    db = _db(client_factory, shard)
    reply = db.command(
        "createIndexes",
        "coll",
        indexes=[
            {"key": {"a": 1}, "name": "a_1"},
            {"key": {"b": -1, "c": 1}, "name": "bc", "unique": True},
        ],
    )
    assert reply["createdCollectionAutomatically"] is True
    assert (reply["numIndexesBefore"], reply["numIndexesAfter"]) == (1, 3)
    create, first, second = _commands(shard)
    assert create["o"]["create"] == "coll"
    assert first["o"] == {"createIndexes": "coll", "v": 2, "key": {"a": 1}, "name": "a_1"}
    assert list(second["o"]) == ["createIndexes", "v", "key", "name", "unique"]
    again = db.command("createIndexes", "coll", indexes=[{"key": {"a": 1}, "name": "a_1"}])
    assert again["numIndexesBefore"] == again["numIndexesAfter"] == 3
    assert len(_commands(shard)) == 3
    with pytest.raises(OperationFailure) as conflict:
        db.command("createIndexes", "coll", indexes=[{"key": {"z": 1}, "name": "a_1"}])
    assert conflict.value.code == 86
    listed = list(db.coll.list_indexes())
    assert [spec["name"] for spec in listed] == ["_id_", "a_1", "bc"]
    assert listed[2] == {"v": 2, "key": {"b": -1, "c": 1}, "name": "bc", "unique": True}


def test_drop_indexes_by_name_key_list_and_star(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    db = _db(client_factory, shard)
    db.coll.create_indexes([IndexModel([(name, ASCENDING)]) for name in "abcde"])
    db.coll.drop_index("a_1")
    db.coll.drop_index([("b", ASCENDING)])
    db.command("dropIndexes", "coll", index=["c_1", "d_1"])
    reply = db.command("dropIndexes", "coll", index="*")
    assert reply["nIndexesWas"] == 2
    drops = [entry for entry in _commands(shard) if "dropIndexes" in entry["o"]]
    assert [entry["o"]["index"] for entry in drops] == ["a_1", "b_1", "c_1", "d_1", "e_1"]
    assert drops[0]["o"] == {"dropIndexes": "coll", "index": "a_1"}
    assert drops[0]["o2"] == {"v": 2, "key": {"a": 1}, "name": "a_1"}
    assert [spec["name"] for spec in db.coll.list_indexes()] == ["_id_"]
    for index, code in (("_id_", 72), ("nope", 27)):
        with pytest.raises(OperationFailure) as failed:
            db.command("dropIndexes", "coll", index=index)
        assert failed.value.code == code
    assert list(db.missing.list_indexes()) == []  # pymongo hides NamespaceNotFound here
    with pytest.raises(OperationFailure) as missing:
        db.command("listIndexes", "missing")
    assert missing.value.code == 26


def test_list_databases_count_and_drop_database(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)
    client.db1.a.insert_many([{"_id": 1}, {"_id": 2, "x": 1}])
    client.db1.b.insert_one({"_id": 1})
    client.db2.c.insert_one({"_id": 1})
    assert client.list_database_names() == ["db1", "db2"]
    listed = client.admin.command("listDatabases")
    assert [db["name"] for db in listed["databases"]] == ["db1", "db2"]
    assert all(db["sizeOnDisk"] > 0 and db["empty"] is False for db in listed["databases"])
    assert listed["totalSize"] == sum(db["sizeOnDisk"] for db in listed["databases"])
    assert client.db1.a.estimated_document_count() == 2
    assert client.db1.command("count", "a", query={"x": 1})["n"] == 1
    client.drop_database("db1")
    entries = _commands(shard)[-3:]
    assert [entry["o"] for entry in entries] == [{"drop": "a"}, {"drop": "b"}, {"dropDatabase": 1}]
    assert entries[-1]["ns"] == "db1.$cmd"
    assert "ui" not in entries[-1]
    assert client.list_database_names() == ["db2"]


def test_append_oplog_note_logs_a_no_op(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)
    client.admin.command("appendOplogNote", data={"msg": "sync marker", "n": 1})
    (entry,) = [bson.decode(entry.raw) for entry in shard.oplog.entries()]
    assert list(entry) == ["op", "ns", "o", "ts", "t", "v", "wall"]
    assert (entry["op"], entry["ns"], entry["o"]) == ("n", "", {"msg": "sync marker", "n": 1})
    assert shard.oplog.majority == entry["ts"]
    with pytest.raises(OperationFailure):
        client.db.command("appendOplogNote", data={})


def test_load_collection_sets_options_and_indexes_without_logging(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    shard.load_collection(
        "db.coll",
        [{"_id": 1, "e": "a"}],
        options={"validationLevel": "off"},
        indexes=[{"key": {"e": 1}, "name": "e_1", "unique": True}],
    )
    db = _db(client_factory, shard)
    (listed,) = db.list_collections()
    assert listed["options"] == {"validationLevel": "off"}
    assert isinstance(listed["info"]["uuid"], Binary)
    assert db.coll.index_information()["e_1"]["unique"] is True
    with pytest.raises(OperationFailure) as dup:
        db.coll.insert_one({"_id": 2, "e": "a"})
    assert dup.value.code == 11000
    assert _commands(shard) == []
