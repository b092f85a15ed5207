"""Emulator: each injected fault reaches real pymongo as the matching error or state."""

from __future__ import annotations

from typing import Any

import pytest
from bson.timestamp import Timestamp
from pymongo import CursorType
from pymongo.cursor import Cursor
from pymongo.errors import (
    AutoReconnect,
    CursorNotFound,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
)

from shardstream.emulator import EmulatedReplicaSet
from tests.deadlines import returns_within

from .conftest import ClientFactory


def _fill(shard: EmulatedReplicaSet, count: int = 5) -> None:
    for second in range(1, count + 1):
        shard.append({"ts": Timestamp(second, 1), "op": "n", "o": {}})


def _tail(
    shard: EmulatedReplicaSet, client_factory: ClientFactory, **client_kw: Any
) -> Cursor[Any]:
    oplog = client_factory(shard.uri, **client_kw).local["oplog.rs"]
    cursor = oplog.find(
        {"ts": {"$gte": Timestamp(1, 1)}}, cursor_type=CursorType.TAILABLE_AWAIT, batch_size=2
    ).max_await_time_ms(50)
    assert next(cursor)["ts"] == Timestamp(1, 1)
    assert next(cursor)["ts"] == Timestamp(2, 1)
    return cursor  # the next next() sends a getMore


def _plain(shard: EmulatedReplicaSet, client_factory: ClientFactory) -> Cursor[Any]:
    cursor = client_factory(shard.uri).local["oplog.rs"].find({}, batch_size=2)
    next(cursor)
    next(cursor)
    return cursor


def test_hangup_on_get_more(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    _fill(shard)
    cursor = _tail(shard, client_factory)
    shard.drop_next_get_more()
    with pytest.raises(AutoReconnect):
        next(cursor)
    assert not cursor.alive


def test_cursor_not_found(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    _fill(shard)
    cursor = _plain(shard, client_factory)
    shard.cursor_not_found_on_next_get_more()
    with pytest.raises(CursorNotFound) as raised:
        next(cursor)
    assert raised.value.code == 43
    assert shard.open_cursor_count == 0


def test_cursor_not_found_on_a_tailable_cursor_is_silent(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    _fill(shard)
    cursor = _tail(shard, client_factory)
    shard.cursor_not_found_on_next_get_more()
    assert next(cursor, None) is None
    assert not cursor.alive


@pytest.mark.parametrize(
    ("inject", "code"),
    [
        (EmulatedReplicaSet.not_primary_on_next_get_more, 10107),
        (EmulatedReplicaSet.interrupted_on_next_get_more, 11602),
    ],
)
def test_not_primary_errors(
    inject: Any, code: int, shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    _fill(shard)
    cursor = _tail(shard, client_factory)
    inject(shard, labels=["ResumableChangeStreamError"])
    with pytest.raises(NotPrimaryError) as raised:
        next(cursor)
    assert raised.value.details is not None
    assert raised.value.details["code"] == code
    assert raised.value.has_error_label("ResumableChangeStreamError")
    assert not raised.value.has_error_label("RetryableWriteError")


def test_stall_beyond_socket_timeout(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    _fill(shard)
    cursor = _tail(shard, client_factory, socketTimeoutMS=300)
    # The stall outlasts the deadline (it ends when the shard stops): the getMore comes back
    # in time only as the driver's timeout, which also shows the reply was held.
    shard.stall_next_get_more(600.0)
    with pytest.raises(NetworkTimeout):
        returns_within(lambda: next(cursor), "a getMore stalled past socketTimeoutMS", 20)


def test_silent_cursor_death(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    _fill(shard)
    cursor = _tail(shard, client_factory)
    shard.kill_cursor_silently_on_next_get_more()
    assert next(cursor, None) is None
    assert not cursor.alive
    assert shard.open_cursor_count == 0


def test_roll_over_loses_an_open_cursor_position(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    _fill(shard)
    plain = _plain(shard, client_factory)
    tail = _tail(shard, client_factory)
    assert shard.roll_over(Timestamp(4, 1)) == 3
    assert shard.oplog.first_ts == Timestamp(4, 1)
    with pytest.raises(OperationFailure) as raised:
        next(plain)
    assert raised.value.code == 136
    assert next(tail, None) is None  # pymongo swallows 136 on a tailable cursor
    assert not tail.alive


def test_find_from_a_fallen_off_ts_starts_at_the_new_first_entry(
    shard: EmulatedReplicaSet, client_factory: ClientFactory
):
    # A real mongod does not fail this find: the reader must see that its ts is missing.
    _fill(shard)
    shard.roll_over(Timestamp(4, 1))
    oplog = client_factory(shard.uri).local["oplog.rs"]
    first = oplog.find_one({"ts": {"$gte": Timestamp(2, 1)}})
    assert first is not None
    assert first["ts"] == Timestamp(4, 1)


def test_unknown_command_and_no_auth(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    client = client_factory(shard.uri)
    with pytest.raises(OperationFailure) as raised:
        client.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256", payload=b"")
    assert raised.value.code == 59


def test_drop_connections_then_reconnect(shard: EmulatedReplicaSet, client_factory: ClientFactory):
    client = client_factory(shard.uri)
    assert client.config["system.preimages"].find_one({}) is None
    assert shard.drop_connections() >= 1
    # The pooled connection is dead; pymongo retries a find once, on a fresh connection
    # (runCommand, such as ping, is never retried and would raise AutoReconnect).
    assert client.config["system.preimages"].find_one({}) is None
    assert client.admin.command("ping")["ok"] == 1.0
