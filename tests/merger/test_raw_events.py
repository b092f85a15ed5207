"""ChangeStream.try_next_raw: the events as BSON bytes, and the watch command's JSON from them."""

from __future__ import annotations

import json
from typing import Any

import bson
import pytest
from bson import json_util
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

import shardstream
from shardstream.change_stream import ChangeStream
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster
from shardstream.merger.raw.encoded_event import leading_id
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from tests import factories as make
from tests.deadlines import Deadline, returns_within
from tests.oplog.live_helpers import load_committed
from tests.paths import FAST, OnPath

T = [Timestamp(1700000000, i) for i in range(20)]
IDS = [ObjectId(f"{i:024x}") for i in range(8)]  # ObjectId keys: what the fast path writes


def _oplogs() -> dict[str, list[dict[str, Any]]]:
    return {
        "shard00": [
            make.noop(T[1]),
            make.insert(T[2], {"_id": IDS[1], "name": "é", "n": 1.5}),
            make.insert(T[5], {"_id": IDS[5], "when": T[5]}),
        ],
        "shard01": [
            make.noop(T[1]),
            make.insert(T[2], {"_id": IDS[2], "tags": ["a", "b"]}),
            make.update(T[3], IDS[2], {"u": {"a": 1}}),
            make.noop(T[9]),
        ],
    }


def _cluster() -> EmulatedCluster:
    cluster = EmulatedCluster(shards=2)
    load_committed(cluster, _oplogs())
    return cluster


def _drain(stream: ChangeStream, count: int, raw: bool) -> list[tuple[Any, Any]]:
    got: list[tuple[Any, Any]] = []
    deadline = Deadline(f"{count} events from the stream")
    while len(got) < count:
        deadline.check(f"{len(got)} arrived")
        event = stream.try_next_raw() if raw else stream.try_next()
        if event is not None:
            got.append((event, stream.resume_token))
    return got


def test_raw_events_are_the_events_bytes_with_the_same_resume_tokens(
    path: OnPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_events: list[bytes] = []

    def counted(raw: bytes) -> dict[str, Any] | None:
        fast_events.append(raw)
        return leading_id(raw)

    with _cluster() as cluster:
        with path.watch(cluster.uri, start_at_operation_time=T[1], max_await_time_ms=100) as s:
            decoded = _drain(s, 4, raw=False)
        if path == FAST:  # the raw events are handed out undecoded

            def refuse(raw: bytes) -> dict[str, Any]:
                raise AssertionError("try_next_raw decoded an event")

            monkeypatch.setattr("shardstream.merger.raw.encoded_event.decode_event", refuse)
            monkeypatch.setattr("shardstream.change_stream.leading_id", counted)
        with path.watch(cluster.uri, start_at_operation_time=T[1], max_await_time_ms=100) as s:
            raw = _drain(s, 4, raw=True)
    assert [bson.decode(r, codec_options=OPLOG_CODEC_OPTIONS) for r, _ in raw] == [
        d for d, _ in decoded
    ]
    assert [token for _, token in raw] == [token for _, token in decoded]
    # On the fast path the inserts and the update were written by it, not by the fallback.
    assert len(fast_events) == (4 if path == FAST else 0)


@pytest.mark.parametrize("mode", ["canonical", "relaxed"])
def test_the_watch_command_writes_json_utils_text_in_either_mode(
    mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    options = (
        json_util.CANONICAL_JSON_OPTIONS if mode == "canonical" else json_util.RELAXED_JSON_OPTIONS
    )
    with _cluster() as cluster:
        with _reference(cluster) as stream:
            expected = [
                json_util.dumps(e, json_options=options) for e, _ in _drain(stream, 4, False)
            ]
        argv = ["watch", cluster.uri, "--start-at-operation-time", "1700000000,1", "--json", mode]
        # The command runs until its 4th event: a merge that held one back would never end.
        assert returns_within(lambda: main([*argv, "--max-events", "4"]), "watch 4 events") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == expected
    assert json.loads(lines[0])["fullDocument"]["name"] == "é"


def _reference(cluster: EmulatedCluster) -> ChangeStream:
    return shardstream.watch(
        cluster.uri, start_at_operation_time=T[1], max_await_time_ms=100, fast_path=False
    )
