"""Fixtures for the emulator's wire tests: emulated nodes and real pymongo clients."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet

ClientFactory = Callable[..., MongoClient[dict[str, Any]]]


def _emulator_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("emulator-")]


@pytest.fixture
def client_factory() -> Iterator[ClientFactory]:
    """Make MongoClients that are closed after the test (before the emulator stops)."""
    clients: list[MongoClient[dict[str, Any]]] = []

    def make(uri: str, **kwargs: Any) -> MongoClient[dict[str, Any]]:
        kwargs.setdefault("serverSelectionTimeoutMS", 2000)
        client: MongoClient[dict[str, Any]] = MongoClient(uri, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def shard() -> Iterator[EmulatedReplicaSet]:
    """A started one-node replica set; afterwards no emulator thread may survive."""
    with EmulatedReplicaSet("rs0") as rs:
        yield rs
    assert not _emulator_threads()


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    """A started mongos with two shards; afterwards no emulator thread may survive."""
    with EmulatedCluster(shards=2) as emulated:
        yield emulated
    assert not _emulator_threads()
