"""Emulator: real pymongo discovers emulated shards and a mongos and runs admin commands."""

from __future__ import annotations

import socket
import struct
import time

import bson
import pytest
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from shardstream.emulator.wire import OP_QUERY, OP_REPLY

from .conftest import ClientFactory


@pytest.mark.parametrize("wire", [21, 25])
def test_shard_hello_through_replica_set_discovery(wire: int, client_factory: ClientFactory):
    with EmulatedReplicaSet("shardA", max_wire_version=wire) as rs:
        client = client_factory(rs.uri)
        hello = client.admin.command("hello")
        assert hello["setName"] == "shardA"
        assert hello["hosts"] == [rs.host]
        assert hello["isWritablePrimary"] is True
        assert hello["maxWireVersion"] == wire
        assert client.topology_description.topology_type_name == "ReplicaSetWithPrimary"
        assert client.admin.command("ping")["ok"] == 1.0
        version = client.admin.command("buildInfo")["version"]
        assert version == ("7.0.0" if wire == 21 else "8.0.0")
        client.close()


def test_direct_connection(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    client = client_factory(shard.direct_uri)
    assert client.admin.command("isMaster")["ismaster"] is True
    assert client.topology_description.topology_type_name == "Single"


def test_majority_point_reported(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    for second in (10, 11, 12):
        shard.append({"ts": Timestamp(second, 1), "op": "n", "o": {}})
    shard.set_majority(Timestamp(11, 1))
    client = client_factory(shard.uri)
    status = client.admin.command("replSetGetStatus")
    assert status["optimes"]["lastCommittedOpTime"]["ts"] == Timestamp(11, 1)
    assert status["optimes"]["appliedOpTime"]["ts"] == Timestamp(12, 1)
    hello = client.admin.command("hello")
    assert hello["lastWrite"]["majorityOpTime"]["ts"] == Timestamp(11, 1)
    assert hello["lastWrite"]["opTime"]["ts"] == Timestamp(12, 1)
    assert hello["operationTime"] == Timestamp(12, 1)
    with pytest.raises(ValueError, match="cannot go back"):
        shard.set_majority(Timestamp(10, 1))


def test_mongos_lists_shards(cluster: EmulatedCluster, client_factory: ClientFactory):
    client = client_factory(cluster.uri)
    assert client.admin.command("hello")["msg"] == "isdbgrid"
    assert client.topology_description.topology_type_name == "Sharded"
    shards = client.admin.command("listShards")["shards"]
    assert [s["host"] for s in shards] == [s.shard_host for s in cluster.shards]
    assert all(s["state"] == 1 for s in shards)
    assert list(client.config.shards.find()) == shards
    # Each listed host string is a working replica-set seed.
    name, host = shards[1]["host"].split("/")
    shard_client = client_factory(f"mongodb://{host}/?replicaSet={name}")
    assert shard_client.admin.command("hello")["setName"] == name


def test_add_and_remove_shard_at_runtime(cluster: EmulatedCluster, client_factory: ClientFactory):
    client = client_factory(cluster.uri)
    added = cluster.add_shard("extra")
    assert client_factory(added.uri).admin.command("ping")["ok"] == 1.0
    ids = [s["_id"] for s in client.admin.command("listShards")["shards"]]
    assert ids == ["shard00", "shard01", "extra"]
    cluster.remove_shard("shard00")
    ids = [s["_id"] for s in client.admin.command("listShards")["shards"]]
    assert ids == ["shard01", "extra"]


def test_streaming_monitor_does_not_busy_loop(shard: EmulatedReplicaSet):
    client: MongoClient[dict[str, object]] = MongoClient(
        shard.uri, serverSelectionTimeoutMS=2000, heartbeatFrequencyMS=500
    )
    try:
        client.admin.command("ping")
        time.sleep(0.6)  # a polling-storm bug would show hundreds of hellos here
        hellos = sum(name in ("hello", "ismaster") for name in shard.commands_seen)
        assert hellos < 20
        shard.bump_topology()  # a topology change is pushed at once over the stream
        assert client.admin.command("ping")["ok"] == 1.0
    finally:
        client.close()


def test_legacy_op_query_is_master(shard: EmulatedReplicaSet):
    # pymongo <= 4.13 opens each connection with OP_QUERY isMaster; 4.20 no longer does.
    query = bson.encode({"isMaster": 1, "helloOk": True})
    payload = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1) + query
    header = struct.pack("<iiii", 16 + len(payload), 77, 0, OP_QUERY)
    with socket.create_connection(("127.0.0.1", shard.port), timeout=2) as sock:
        sock.sendall(header + payload)
        length, _, response_to, opcode = struct.unpack("<iiii", sock.recv(16))
        body = b""
        while len(body) < length - 16:
            body += sock.recv(length - 16 - len(body))
    assert (opcode, response_to) == (OP_REPLY, 77)
    reply = bson.decode(body[20:])
    assert reply["ismaster"] is True
    assert reply["setName"] == "rs0"
