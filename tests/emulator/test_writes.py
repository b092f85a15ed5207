"""Emulator: real pymongo writes (insert, update, delete) and reads back exactly what it wrote."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.code import Code
from bson.codec_options import CodecOptions
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.timestamp import Timestamp
from pymongo import DeleteOne, InsertOne, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError

from shardstream.emulator import EmulatedReplicaSet

from .conftest import ClientFactory

RAW = CodecOptions(document_class=RawBSONDocument)


def _coll(client_factory: ClientFactory, shard: EmulatedReplicaSet) -> Collection[Any]:
    return client_factory(shard.uri).db.coll


def _entries(shard: EmulatedReplicaSet, op: str | None = None) -> list[dict[str, Any]]:
    entries = [bson.decode(entry.raw) for entry in shard.oplog.entries()]
    return [entry for entry in entries if op is None or entry["op"] == op]


def _awkward() -> dict[str, Any]:
    return {
        "_id": "awkward",
        "dec": Decimal128("1.10"),
        "long": Int64(5),
        "int": 7,
        "double": 1.0,
        "before_year_1": DatetimeMS(-62_135_596_800_000 - 86_400_000),
        "after_9999": DatetimeMS(253_402_300_800_000 + 1_000),
        "datetime": datetime.datetime(2024, 1, 2, 3, 4, 5, 678_000),
        "regex": Regex("^a.*b$", "imx"),
        "bin0": Binary(b"\x00\x01", 0),
        "old_binary": Binary(b"ab", 2),
        "uuid3": Binary(bytes(range(16)), 3),
        "uuid4": Binary(uuid.UUID(int=7).bytes, 4),
        "user_binary": Binary(b"x", 128),
        "nested": [[1, [2, {"b": [None, True], "a": MinKey()}]], [], {}],
        "ts": Timestamp(5, 6),
        "max": MaxKey(),
        "code": Code("f()"),
        "code_with_scope": Code("g()", {"z": 1}),
        "null": None,
        "sub": {"b": 2, "a": 1},
    }


def test_insert_then_find_round_trips_the_bytes(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    raw = bson.encode(_awkward())
    coll = _coll(client_factory, shard).with_options(codec_options=RAW)
    coll.insert_one(RawBSONDocument(raw))
    found = coll.find_one({"_id": "awkward"})
    assert found is not None
    assert found.raw == raw
    (insert,) = [entry for entry in shard.oplog.entries() if entry["op"] == "i"]
    assert insert["o"].raw == raw  # the oplog logs the same bytes
    assert bson.decode(insert["o2"].raw) == {"_id": "awkward"}


def test_a_loaded_document_reads_back_as_the_test_wrote_it(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    shard.load_collection("db.coll", [{"x": 1, "_id": 2}, _awkward()])
    coll = _coll(client_factory, shard).with_options(codec_options=RAW)
    first, second = list(coll.find())
    assert bson.decode(first.raw) == {"_id": 2, "x": 1}  # _id first, as mongod stores it
    assert list(bson.decode(first.raw)) == ["_id", "x"]
    assert second.raw == bson.encode(_awkward())
    assert _entries(shard) == []  # loading logs nothing


def test_ordered_insert_stops_at_the_first_duplicate(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([{"_id": 0}, {"_id": 1}, {"_id": 2}])
    details = info.value.details
    assert details["nInserted"] == 1
    (error,) = details["writeErrors"]
    assert (error["index"], error["code"]) == (1, 11000)
    assert error["keyPattern"] == {"_id": 1}
    assert error["keyValue"] == {"_id": 1}
    assert [doc["_id"] for doc in coll.find()] == [1, 0]


def test_unordered_insert_goes_on_after_a_duplicate(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([{"_id": 1}, {"_id": 3}, {"_id": 3}, {"_id": 4}], ordered=False)
    details = info.value.details
    assert details["nInserted"] == 2
    assert [(e["index"], e["code"], e["keyValue"]) for e in details["writeErrors"]] == [
        (0, 11000, {"_id": 1}),
        (2, 11000, {"_id": 3}),
    ]
    assert [doc["_id"] for doc in coll.find()] == [1, 3, 4]


def test_unique_indexes_are_enforced_on_insert_update_and_build(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.create_index("email", unique=True)
    coll.insert_many([{"_id": 1, "email": "a"}, {"_id": 2, "email": "b"}, {"_id": 3}])
    with pytest.raises(DuplicateKeyError) as dup:
        coll.insert_one({"_id": 4, "email": "a"})
    assert dup.value.details is not None
    assert dup.value.details["keyValue"] == {"email": "a"}
    assert dup.value.details["keyPattern"] == {"email": 1}
    with pytest.raises(DuplicateKeyError) as missing:
        coll.insert_one({"_id": 5})  # a missing field is null, like _id 3's
    assert missing.value.details is not None
    assert missing.value.details["keyValue"] == {"email": None}
    with pytest.raises(WriteError) as update:
        coll.update_one({"_id": 2}, {"$set": {"email": "a"}})
    assert update.value.code == 11000
    coll.update_one({"_id": 1}, {"$set": {"email": "c"}})  # frees "a"
    coll.update_one({"_id": 2}, {"$set": {"email": "a"}})
    assert [doc["email"] for doc in coll.find({"_id": {"$lte": 2}})] == ["c", "a"]
    other = coll.database.other
    other.insert_many([{"_id": 6, "n": 1}, {"_id": 7, "n": 1}])
    with pytest.raises(OperationFailure) as build:
        other.create_index("n", unique=True)
    assert build.value.code == 11000
    assert "n_1" not in other.index_information()


def test_replacement_keeps_the_id_and_may_not_change_it(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1, "a": 1, "b": 2})
    result = coll.replace_one({"a": 1}, {"c": 3})
    assert (result.matched_count, result.modified_count) == (1, 1)
    assert coll.find_one({"_id": 1}) == {"_id": 1, "c": 3}
    with pytest.raises(WriteError) as info:
        coll.replace_one({"_id": 1}, {"_id": 2, "c": 3})
    assert info.value.code == 66
    update = _entries(shard, "u")[-1]
    assert list(update) == ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]
    assert (update["o"], update["o2"]) == ({"_id": 1, "c": 3}, {"_id": 1})


def test_update_operators_with_dotted_paths(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one(
        {"_id": 1, "n": 1, "long": Int64(1), "big": 2**31 - 1, "sub": {"x": 1}, "old": 0}
    )
    coll.update_one(
        {"_id": 1},
        {
            "$set": {"z": 1, "sub.y.deep": "d", "a": 2},
            "$inc": {"n": 2, "long": 1, "big": 1, "f": 0.5},
            "$unset": {"old": ""},
            "$setOnInsert": {"never": True},
        },
    )
    doc = coll.with_options(codec_options=RAW).find_one({"_id": 1})
    assert doc is not None
    decoded = bson.decode(doc.raw)
    assert decoded == {
        "_id": 1,
        "n": 3,
        "long": Int64(2),
        "big": 2**31,  # an int32 that overflows becomes an int64, as on mongod
        "sub": {"x": 1, "y": {"deep": "d"}},
        "a": 2,  # new fields in lexicographic order, whatever the operator's order
        "f": 0.5,
        "z": 1,
    }
    assert isinstance(decoded["long"], Int64)
    assert isinstance(decoded["big"], Int64)
    update = _entries(shard, "u")[-1]
    assert update["o"] == {
        "$v": 2,
        "diff": {
            "d": {"old": False},
            "u": {
                "n": 3,
                "long": Int64(2),
                "big": Int64(2**31),
                "sub": {"x": 1, "y": {"deep": "d"}},
            },
            "i": {"a": 2, "f": 0.5, "z": 1},
        },
    }


def test_array_filters_and_indexes(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1, "grades": [70, 90, 95], "items": [{"q": 1}, {"q": 5}]})
    coll.update_one(
        {"_id": 1}, {"$set": {"grades.$[high]": 100}}, array_filters=[{"high": {"$gte": 90}}]
    )
    coll.update_one({"_id": 1}, {"$inc": {"items.$[].q": 1, "grades.0": 1}})
    coll.update_one({"_id": 1}, {"$set": {"grades.5": 1}})
    assert coll.find_one({"_id": 1}) == {
        "_id": 1,
        "grades": [71, 100, 100, None, None, 1],
        "items": [{"q": 2}, {"q": 6}],
    }


def test_a_no_op_update_is_not_logged(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1, "a": 1})
    before = len(shard.oplog.entries())
    result = coll.update_one({"_id": 1}, {"$set": {"a": 1}})
    assert (result.matched_count, result.modified_count) == (1, 0)
    assert len(shard.oplog.entries()) == before


def test_reordering_fields_logs_a_replacement(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1, "a": 1, "b": 2})
    coll.update_one({"_id": 1}, [{"$replaceWith": {"b": 2, "a": 1}}])
    assert list(coll.find_one({"_id": 1}) or {}) == ["_id", "b", "a"]
    update = _entries(shard, "u")[-1]
    assert update["o"] == {"_id": 1, "b": 2, "a": 1}
    coll.update_one({"_id": 1}, [{"$set": {"c": 3}}])
    assert _entries(shard, "u")[-1]["o"] == {"$v": 2, "diff": {"i": {"c": 3}}}


def test_upserts_build_from_the_query(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    result = coll.update_one(
        {"_id": 5, "a.b": 1, "c": {"$eq": 2}, "d": {"$gt": 0}},
        {"$set": {"e": 3}, "$setOnInsert": {"f": 4}},
        upsert=True,
    )
    assert result.upserted_id == 5
    assert coll.find_one({"_id": 5}) == {"_id": 5, "a": {"b": 1}, "c": 2, "e": 3, "f": 4}
    replaced = coll.replace_one({"_id": 6, "x": 1}, {"y": 2}, upsert=True)
    assert replaced.upserted_id == 6
    assert coll.find_one({"_id": 6}) == {"_id": 6, "y": 2}
    generated = coll.update_one({"k": 1}, {"$inc": {"n": 1}}, upsert=True)
    assert isinstance(generated.upserted_id, ObjectId)
    assert coll.find_one({"k": 1}) == {"_id": generated.upserted_id, "k": 1, "n": 1}
    assert [entry["op"] for entry in _entries(shard)] == ["c", "i", "i", "i"]


def test_multi_update_and_delete(shard: EmulatedReplicaSet, client_factory: ClientFactory) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_many([{"_id": n, "even": n % 2 == 0} for n in range(6)])
    result = coll.update_many({"even": True}, {"$set": {"seen": 1}})
    assert (result.matched_count, result.modified_count) == (3, 3)
    assert coll.delete_one({"even": True}).deleted_count == 1
    assert coll.delete_many({"even": False}).deleted_count == 3
    assert [doc["_id"] for doc in coll.find()] == [2, 4]
    deletes = _entries(shard, "d")
    assert [entry["o"] for entry in deletes] == [{"_id": 0}, {"_id": 1}, {"_id": 3}, {"_id": 5}]
    assert list(deletes[0]) == ["op", "ns", "ui", "o", "ts", "t", "v", "wall"]


def test_bulk_write_mixes_operations(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    result = coll.bulk_write(
        [InsertOne({"_id": 1}), UpdateOne({"_id": 1}, {"$set": {"a": 1}}), DeleteOne({"_id": 9})]
    )
    assert (result.inserted_count, result.modified_count, result.deleted_count) == (1, 1, 0)


def test_unsupported_operators_and_filters_are_refused(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    coll = _coll(client_factory, shard)
    coll.insert_one({"_id": 1, "tags": []})
    with pytest.raises(WriteError) as operator:
        coll.update_one({"_id": 1}, {"$push": {"tags": "x"}})
    assert operator.value.code == 2
    with pytest.raises(WriteError) as query:
        coll.update_one({"tags": {"$size": 0}}, {"$set": {"a": 1}})
    assert query.value.code == 2
    with pytest.raises(WriteError) as immutable:
        coll.update_one({"_id": 1}, {"$set": {"_id": 2}})
    assert immutable.value.code == 66
    with pytest.raises(WriteError) as mismatch:
        coll.update_one({"_id": 1}, {"$inc": {"tags": 1}})
    assert mismatch.value.code == 14
    assert coll.find_one({"_id": 1}) == {"_id": 1, "tags": []}


def test_entries_are_stamped_after_the_last_and_majority_committed(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    future = Timestamp(4_000_000_000, 7)  # a test-appended entry ahead of the wall clock
    shard.append({"ts": future, "op": "n", "ns": "", "o": {"msg": "x"}})
    _coll(client_factory, shard).insert_one({"_id": 1})
    create, insert = _entries(shard)[1:]
    assert (create["ts"], insert["ts"]) == (Timestamp(future.time, 8), Timestamp(future.time, 9))
    assert shard.oplog.majority == insert["ts"]
    assert list(create) == ["op", "ns", "ui", "o", "ts", "t", "v", "wall"]
    assert create["o"] == {"create": "coll", "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}}
    assert (create["ns"], create["t"], create["v"]) == ("db.$cmd", 1, 2)
    assert insert["ui"] == create["ui"]
    assert isinstance(insert["ui"], Binary)
    assert insert["ui"].subtype == 4


def test_writes_to_local_are_not_logged(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client_factory(shard.uri).local.scratch.insert_one({"_id": 1})
    assert _entries(shard) == []


def test_an_int_id_write_finds_an_equal_id_of_another_type_while_one_is_stored(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    # A miss on an int _id is final (no scan) only while no double, decimal, long or bool
    # _id is stored: one of those may equal it.
    coll = _coll(client_factory, shard)
    coll.insert_many([{"_id": 1.0}, {"_id": Decimal128("2.00")}, {"_id": Int64(3)}, {"_id": 4}])
    for key in (1, 2, 3):
        assert coll.update_one({"_id": key}, {"$set": {"seen": key}}).modified_count == 1
    assert coll.delete_many({"_id": {"$in": [1, 2, 3]}}).deleted_count == 3
    coll.update_one({"_id": 1}, {"$set": {"new": True}}, upsert=True)
    coll.update_one({"_id": 4}, {"$set": {"seen": 4}}, upsert=True)
    assert sorted(coll.find(), key=lambda doc: doc["_id"]) == [
        {"_id": 1, "new": True},
        {"_id": 4, "seen": 4},
    ]
