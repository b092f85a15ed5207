"""Runs of write statements sent as ordered ``update`` / ``delete`` commands through pymongo.

Against the emulated cluster (the wire protocol, pymongo's real command path): every
statement applied in order; commands cut at a switch between updates and deletes and at
the limits on a command's statements and bytes; a statement too big for a command body sent
alone through the bulk API; the first refused write stopping the run with the bulk API's
error, its index counted in the writes passed; writes in a transaction committed with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bson
import pytest
from pymongo import MongoClient, monitoring
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError

import shardstream.cluster_sync.statement_commands as commands
from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.statement_commands import send_statements
from shardstream.cluster_sync.write_statements import DELETE, REPLACE, UPDATE, statement_of
from shardstream.emulator import EmulatedCluster

NS = ("shop", "orders")


def _write(kind: int, doc: int, body: Any = None) -> CrudWrite:
    statement = statement_of(kind, {"_id": doc}, body)
    return CrudWrite(NS, bson.encode({"_id": doc}), statement, kind, {"_data": "82"}, None)


def _replace(doc: int, **fields: Any) -> CrudWrite:
    return _write(REPLACE, doc, {"_id": doc, **fields})


@pytest.fixture
def orders() -> Iterator[Collection[Any]]:
    with EmulatedCluster(shards=1) as target:
        client: MongoClient[Any] = MongoClient(target.uri)
        with client:
            yield client.shop.orders


class CommandLog(monitoring.CommandListener):
    """The write commands pymongo sends (a command listener)."""

    def __init__(self) -> None:
        self.names: list[tuple[str, int]] = []
        self.concerns: list[Any] = []

    def started(self, event: Any) -> None:
        if event.command_name in ("update", "delete"):
            field = "updates" if event.command_name == "update" else "deletes"
            self.names.append((event.command_name, len(event.command[field])))
            self.concerns.append(event.command.get("writeConcern"))

    def succeeded(self, event: Any) -> None:
        pass

    def failed(self, event: Any) -> None:
        pass


@pytest.fixture
def logged() -> Iterator[tuple[MongoClient[Any], CommandLog]]:
    """A client of an emulated cluster whose write commands are logged."""
    log = CommandLog()
    with EmulatedCluster(shards=1) as target:
        client: MongoClient[Any] = MongoClient(target.uri, event_listeners=[log])
        with client:
            yield client, log


def test_a_run_of_each_kind_is_applied_in_order_in_one_command_per_switch(
    logged: tuple[MongoClient[Any], CommandLog],
) -> None:
    client, log = logged
    orders = client.shop.orders
    writes = [
        _replace(1, n=1),
        _replace(2, n=1),
        _write(UPDATE, 1, [{"$set": {"n": 2}}]),
        _write(DELETE, 2),
        _write(DELETE, 3),
        _replace(2, n=3),
    ]
    send_statements(orders, writes)
    assert list(orders.find({}, sort=[("_id", 1)])) == [{"_id": 1, "n": 2}, {"_id": 2, "n": 3}]
    assert log.names == [("update", 3), ("delete", 2), ("update", 1)]


def test_commands_are_cut_at_the_statement_and_byte_limits(
    orders: Collection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "MAX_STATEMENTS", 3)
    writes = [_replace(n, pad="x" * 50) for n in range(10)]
    send_statements(orders, writes)
    assert orders.count_documents({}) == 10
    monkeypatch.setattr(commands, "MAX_COMMAND_BYTES", 3 * (len(writes[0].statement) + 8))
    send_statements(orders, [_replace(n, pad="y" * 50) for n in range(10)])
    assert orders.count_documents({"pad": "y" * 50}) == 10


def test_a_statement_above_a_command_body_goes_alone_through_the_bulk_api(
    orders: Collection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "MAX_COMMAND_BYTES", 200)
    writes = [_replace(1, pad="s"), _replace(2, pad="b" * 300), _replace(3, pad="s")]
    send_statements(orders, writes)
    assert [d["pad"][:1] for d in orders.find({}, sort=[("_id", 1)])] == ["s", "b", "s"]


@pytest.mark.parametrize("large", [False, True])
def test_the_first_refused_write_stops_the_run_and_is_named_by_its_index(
    orders: Collection[Any], monkeypatch: pytest.MonkeyPatch, large: bool
) -> None:
    orders.create_index("qty", unique=True)
    orders.insert_one({"_id": 0, "qty": 5})
    monkeypatch.setattr(commands, "MAX_STATEMENTS", 2)  # the refused write in a later command
    writes = [_replace(1, qty=1), _replace(2, qty=2), _write(DELETE, 9), _replace(3, qty=5)]
    if large:  # the refused write sent alone, through the bulk API
        monkeypatch.setattr(commands, "MAX_COMMAND_BYTES", len(writes[3].statement) - 1)
    writes.append(_replace(4, qty=4))
    with pytest.raises(BulkWriteError) as raised:
        send_statements(orders, writes)
    error = raised.value.details["writeErrors"][0]
    assert error["index"] == 3
    assert error["code"] == 11000
    assert sorted(d["_id"] for d in orders.find()) == [0, 1, 2]  # nothing after it


def test_writes_in_a_transaction_commit_with_it_and_carry_no_write_concern(
    logged: tuple[MongoClient[Any], CommandLog],
) -> None:
    # A statement in a transaction may not name a write concern (the commit does); one
    # outside carries the writers' majority.
    client, log = logged
    orders = client.shop.orders
    send_statements(orders, [_replace(9)])
    with client.start_session() as session, session.start_transaction():
        send_statements(orders, [_replace(1, n=1), _write(DELETE, 9)], session)
    assert list(orders.find()) == [{"_id": 1, "n": 1}]
    assert log.concerns == [{"w": "majority"}, None, None]


def test_a_write_concern_error_alone_is_one_the_retry_judges_by_its_code() -> None:
    # No emulated server fails a write concern: the reply is checked as pymongo hands it.
    from pymongo.errors import WriteConcernError

    from shardstream.oplog.live.faults import Verdict, classify

    stepped_down = {"n": 1, "writeConcernError": {"code": 189, "errmsg": "stepped down"}}
    with pytest.raises(WriteConcernError) as raised:
        commands._check(stepped_down, 0)
    assert raised.value.code == 189
    assert classify(raised.value) is Verdict.RETRY
    timed_out = {"n": 1, "writeConcernError": {"code": 64, "errmsg": "waiting for replication"}}
    with pytest.raises(WriteConcernError) as raised:
        commands._check(timed_out, 0)
    assert classify(raised.value) is Verdict.FATAL
    refused = {"n": 0, "writeErrors": [{"index": 1, "code": 11000, "errmsg": "dup"}]}
    with pytest.raises(BulkWriteError) as bulk:
        commands._check(refused, 5)
    assert bulk.value.details["writeErrors"][0]["index"] == 6
