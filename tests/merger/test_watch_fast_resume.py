"""watch(URI, resume_after=T, fast_resume=True) against the resumed reference path.

``fast_resume`` reads after the stream's own token T on the fast path: the shards start at
T's cluster time and the merged stream drops every event at or below T
(``merger.floored_stream``). The resumed reference path (``fast_path=False``: each shard's
``CheckResumability`` compares decoded events with T) is the oracle: for tokens of events
inside transactions, of a DDL event, of the first and last events and of a high-water mark,
both must give the same events (BSON bytes) and the same resume token after each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

import shardstream
from shardstream.emulator import EmulatedCluster
from shardstream.merger.floored_stream import FlooredStream, resumed_on_fast_path
from shardstream.merger.raw.shard_reader import FastShardReader
from shardstream.merger.shard_reader import ShardReader
from shardstream.resume_token import decode_token_document, encode_token, high_water_mark
from shardstream.transform import ChangeStreamOptions
from tests import factories as make
from tests.merger.test_watch_live_fast_path import END, START, _extras
from tests.oplog.live_helpers import append_committed
from tests.paths import assert_same_steps, drain
from tests.transform.raw_corpus import generate_entries

SYNC_OPTIONS = {"show_expanded_events": True, "show_raw_update_description": True}


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    """Three shards: a corpus with transactions, DDL and chains, then a no-op at END."""
    with EmulatedCluster(shards=3) as running:
        for n, shard in enumerate(running.shards):
            entries = [make.noop(START), *generate_entries(120, seed=n), *_extras(n)]
            append_committed(running.shard(shard.name), [*entries, make.noop(END)])
        yield running


def _read(uri: str, **options: Any) -> tuple[list[Any], type]:
    with shardstream.watch(uri, max_await_time_ms=100, **SYNC_OPTIONS, **options) as stream:
        merged = stream._merged
        inner = merged._stream if isinstance(merged, FlooredStream) else merged
        kinds = {type(reader) for reader in inner._readers.values()}
        assert len(kinds) == 1
        return drain(stream, END), kinds.pop()


@pytest.fixture(scope="module")
def from_start(cluster: EmulatedCluster) -> list[Any]:
    steps, _ = _read(cluster.uri, start_at_operation_time=START)
    assert len(steps) > 200
    return steps


def _tokens(steps: list[Any]) -> dict[str, dict[str, Any]]:
    """Tokens to resume after, one of each kind the sync checkpoints."""
    ids = [event["_id"] for event, _ in steps]
    in_transaction = [event["_id"] for event, _ in steps if "lsid" in event]
    ddl = [event["_id"] for event, _ in steps if event["operationType"] in ("drop", "create")]
    middle_time = decode_token_document(ids[len(ids) // 2]).cluster_time
    return {
        "first event": ids[0],
        "an event in a transaction": in_transaction[1],
        "the last event of a transaction": in_transaction[-1],
        "a DDL event": ddl[0],
        "a high-water mark": encode_token(high_water_mark(middle_time)).to_document(),
        "an event in the middle": ids[len(ids) // 2 + 1],
        "the last event": ids[-1],
    }


def test_the_fast_resume_streams_what_the_resumed_reference_streams(
    cluster: EmulatedCluster, from_start: list[Any]
) -> None:
    for name, token in _tokens(from_start).items():
        fast, fast_kind = _read(cluster.uri, resume_after=token, fast_resume=True)
        reference, reference_kind = _read(cluster.uri, resume_after=token, fast_path=False)
        assert (fast_kind, reference_kind) == (FastShardReader, ShardReader), name
        assert_same_steps(fast, reference)
        # Exactly the events after the token of the stream read from the start.
        after = [event for event, _ in from_start if event["_id"]["_data"] > token["_data"]]
        assert [event["_id"] for event, _ in fast] == [event["_id"] for event in after], name


def test_a_resume_the_fast_path_cannot_take_stays_on_the_reference_path(
    cluster: EmulatedCluster, from_start: list[Any]
) -> None:
    token = from_start[10][0]["_id"]
    _, kind = _read(cluster.uri, resume_after=token, fast_resume=True, full_document="updateLookup")
    assert kind is ShardReader  # images: the fast path refuses them anyway


def test_tokens_the_floor_cannot_be_compared_with_keep_the_reference_path(
    from_start: list[Any],
) -> None:
    data = decode_token_document(from_start[10][0]["_id"])
    options = ChangeStreamOptions(resume_after=data, **SYNC_OPTIONS)
    started = resumed_on_fast_path(options)
    assert started is not None
    assert started.resume_after is None
    assert started.start_at_operation_time == data.cluster_time
    refused = {
        # tokens of two versions do not sort together
        "another version": ChangeStreamOptions(resume_after=data, token_version=1),
        "a fragment's": ChangeStreamOptions(resume_after=dataclasses.replace(data, fragment_num=0)),
        "start_after": ChangeStreamOptions(start_after=data),
    }
    for name, refused_options in refused.items():
        assert resumed_on_fast_path(refused_options) is None, name


def test_without_fast_resume_a_resume_keeps_the_reference_path(
    cluster: EmulatedCluster, from_start: list[Any]
) -> None:
    _, kind = _read(cluster.uri, resume_after=from_start[10][0]["_id"])
    assert kind is ShardReader


def test_the_resume_token_before_the_first_event_is_the_token_resumed_after(
    cluster: EmulatedCluster, from_start: list[Any]
) -> None:
    token = from_start[-1][0]["_id"]
    with shardstream.watch(
        cluster.uri, resume_after=token, fast_resume=True, max_await_time_ms=50, **SYNC_OPTIONS
    ) as stream:
        assert stream.resume_token == token
        assert stream.try_next() is None  # nothing after the last event
        position = stream.resume_token
        assert position is not None
        assert position["_data"] >= token["_data"]
