"""Fixtures shared by the live-tailer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shardstream.emulator import EmulatedReplicaSet


@pytest.fixture
def shard() -> Iterator[EmulatedReplicaSet]:
    """A started one-node shard."""
    with EmulatedReplicaSet("rs0") as rs:
        yield rs
