"""Emulator: pymongo transactions, writes through mongos, and shardstream reading them back."""

from __future__ import annotations

import hashlib
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp
from pymongo.client_session import ClientSession
from pymongo.errors import DuplicateKeyError, OperationFailure

import shardstream
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from tests.merger.stream_helpers import collect

from .conftest import ClientFactory

INNER_FIELDS = ["op", "ns", "ui", "o", "o2"]


def _decoded(shard: EmulatedReplicaSet) -> list[dict[str, Any]]:
    return [bson.decode(entry.raw) for entry in shard.oplog.entries()]


def test_a_committed_transaction_is_one_apply_ops_entry(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)
    coll = client.db.coll
    coll.insert_many([{"_id": 1, "a": 1}, {"_id": 2}])
    before = len(shard.oplog.entries())
    with client.start_session() as session, session.start_transaction():
        coll.insert_one({"_id": 3}, session=session)
        coll.update_one({"_id": 1}, {"$set": {"a": 2}}, session=session)
        coll.delete_one({"_id": 2}, session=session)
        assert coll.find_one({"_id": 3}, session=session) == {"_id": 3}  # reads its writes
        session_id = session.session_id
    entries = _decoded(shard)
    assert len(entries) == before + 1
    entry = entries[-1]
    assert list(entry) == [
        "lsid", "txnNumber", "op", "ns", "o", "ts", "t", "v", "wall", "prevOpTime"
    ]  # fmt: skip
    assert entry["lsid"] == {"id": session_id["id"], "uid": hashlib.sha256(b"").digest()}
    assert (entry["op"], entry["ns"]) == ("c", "admin.$cmd")
    assert entry["prevOpTime"] == {"ts": Timestamp(0, 0), "t": -1}
    ops = entry["o"]["applyOps"]
    assert [list(op) for op in ops] == [INNER_FIELDS, INNER_FIELDS, ["op", "ns", "ui", "o"]]
    assert [(op["op"], op["o"]) for op in ops] == [
        ("i", {"_id": 3}),
        ("u", {"$v": 2, "diff": {"u": {"a": 2}}}),
        ("d", {"_id": 2}),
    ]
    assert shard.oplog.majority == entry["ts"]
    assert list(coll.find()) == [{"_id": 1, "a": 2}, {"_id": 3}]


def test_an_aborted_transaction_leaves_no_trace(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)
    coll = client.db.coll
    coll.insert_many([{"_id": 1, "a": 1}, {"_id": 2}, {"_id": 3}])
    entries_before = _decoded(shard)
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$set": {"a": 2}}, session=session)
        coll.delete_one({"_id": 2}, session=session)
        coll.insert_one({"_id": 4}, session=session)
        client.db.fresh.insert_one({"_id": 1}, session=session)  # created in the transaction
        session.abort_transaction()
    assert _decoded(shard) == entries_before
    assert list(coll.find()) == [{"_id": 1, "a": 1}, {"_id": 2}, {"_id": 3}]  # order kept
    assert client.db.list_collection_names() == ["coll"]


def test_an_abort_undoes_repeated_writes_to_one_document_newest_first(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    # Swapping unique values and deleting then re-inserting one _id: each undo step must
    # restore the state before its write, or a unique index or the order breaks.
    client = client_factory(shard.uri)
    coll = client.db.coll
    coll.create_index("u", unique=True)
    coll.insert_many([{"_id": 1, "u": "a"}, {"_id": 2, "u": "b"}, {"_id": 3, "u": "c"}])
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$set": {"u": "x"}}, session=session)
        coll.update_one({"_id": 2}, {"$set": {"u": "a"}}, session=session)
        coll.update_one({"_id": 1}, {"$set": {"u": "b"}}, session=session)
        coll.delete_one({"_id": 1}, session=session)
        coll.insert_one({"_id": 1, "u": "y"}, session=session)
        coll.delete_one({"_id": 3}, session=session)
        session.abort_transaction()
    assert list(coll.find()) == [{"_id": 1, "u": "a"}, {"_id": 2, "u": "b"}, {"_id": 3, "u": "c"}]
    with pytest.raises(DuplicateKeyError):  # the index holds the restored values again
        coll.insert_one({"_id": 4, "u": "b"})
    coll.insert_one({"_id": 5, "u": "x"})  # and no value the aborted writes claimed


def test_a_duplicate_key_aborts_the_transaction(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)
    coll = client.db.coll
    coll.insert_one({"_id": 1})
    before = len(shard.oplog.entries())
    with client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": 2}, session=session)
        with pytest.raises(DuplicateKeyError):
            coll.insert_one({"_id": 1}, session=session)
        with pytest.raises(OperationFailure) as commit:
            session.commit_transaction()
        assert commit.value.code == 251  # NoSuchTransaction: the failed write aborted it
        assert commit.value.has_error_label("TransientTransactionError")
    assert len(shard.oplog.entries()) == before
    assert list(coll.find()) == [{"_id": 1}]


def test_with_transaction_creates_the_collection_inside_apply_ops(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)

    def write(session: ClientSession) -> None:
        client.db.fresh.insert_one({"_id": 1}, session=session)

    with client.start_session() as session:
        session.with_transaction(write)
        session.with_transaction(lambda s: client.db.fresh.find_one({}, session=s))  # reads only
    (entry,) = _decoded(shard)
    create, insert = entry["o"]["applyOps"]
    assert (create["op"], create["ns"], create["o"]["create"]) == ("c", "db.$cmd", "fresh")
    assert (insert["op"], insert["ui"]) == ("i", create["ui"])


def test_a_transaction_may_start_with_a_read(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)
    client.db.coll.insert_one({"_id": 1})
    with client.start_session() as session, session.start_transaction():
        assert client.db.coll.find_one({"_id": 1}, session=session) == {"_id": 1}
        client.db.coll.insert_one({"_id": 2}, session=session)
    entry = _decoded(shard)[-1]
    assert [op["o"] for op in entry["o"]["applyOps"]] == [{"_id": 2}]


def test_retryable_writes_are_logged_one_by_one(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
) -> None:
    client = client_factory(shard.uri)  # retryWrites is on by default: lsid and txnNumber
    client.db.coll.insert_many([{"_id": 1}, {"_id": 2}])
    assert [entry["op"] for entry in _decoded(shard)] == ["c", "i", "i"]
    assert all("lsid" not in entry for entry in _decoded(shard))
    assert "txnNumber" in shard.last_bodies["insert"]


def test_writes_through_mongos_land_on_the_primary_shard(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    primary, other = cluster.shards
    other.insert("db.coll", {"_id": "loaded on the other shard"})
    client = client_factory(cluster.uri)
    coll = client.db.coll
    coll.insert_one({"_id": 1})
    with client.start_session() as session, session.start_transaction():
        coll.insert_one({"_id": 2}, session=session)
    coll.create_index("a")
    client.admin.command("appendOplogNote", data={"msg": "everywhere"})
    assert [entry["op"] for entry in _decoded(primary)] == ["c", "i", "c", "c", "n"]
    assert [entry["op"] for entry in _decoded(other)] == ["n"]
    assert primary.store.get("db.coll") is not None
    assert sorted(str(doc["_id"]) for doc in coll.find()) == ["1", "2", "loaded on the other shard"]
    assert coll.estimated_document_count() == 3  # count reads every shard, as find does
    assert client.db.list_collection_names() == ["coll"]
    assert client.list_database_names() == ["db"]
    assert "a_1" in coll.index_information()


def test_shardstream_watch_reads_what_a_client_wrote(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    start = Timestamp(1_000, 1)
    for shard in cluster.shards:  # a real oplog begins with the set's initiation
        shard.append({"ts": start, "op": "n", "ns": "", "o": {"msg": "initiating set"}})
        shard.set_majority(start)
    client = client_factory(cluster.uri)
    coll = client.db.coll
    coll.insert_many([{"_id": 1, "a": 1}, {"_id": 2}])
    coll.update_one({"_id": 1}, {"$set": {"a": 2}, "$unset": {"gone": ""}})
    coll.replace_one({"_id": 2}, {"b": 1})
    coll.delete_one({"_id": 1})
    with client.start_session() as session, session.start_transaction():
        coll.insert_many([{"_id": 3}, {"_id": 4}], session=session)
    # The other shard's no-op lets the merge past the primary shard's entries.
    client.admin.command("appendOplogNote", data={"msg": "done"})
    with shardstream.watch(
        cluster.uri, start_at_operation_time=start, max_await_time_ms=100
    ) as stream:
        events = collect(stream, 7)
    assert [event["operationType"] for event in events] == [
        "insert", "insert", "update", "replace", "delete", "insert", "insert"
    ]  # fmt: skip
    assert events[0]["fullDocument"] == {"_id": 1, "a": 1}
    assert events[2]["updateDescription"]["updatedFields"] == {"a": 2}
    assert events[3]["fullDocument"] == {"_id": 2, "b": 1}
    assert [event["documentKey"]["_id"] for event in events[5:]] == [3, 4]
    assert events[5]["txnNumber"] == events[6]["txnNumber"]
    assert "lsid" in events[5]
