"""watch() and ChangeStream: pymongo's surface over merged shard oplogs.

On both paths (the ``path`` fixture, tests/paths.py): on the fast path the shards
deliver raw entries whenever the stream's options let the fast readers read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenError, ResumeTokenNotFound
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token import ResumeTokenData, decode_token_document, encode_token
from shardstream.sim import SimulatedCluster, SimulationConfig, simulated_sources
from tests import factories as make
from tests.deadlines import DRAIN_S, Deadline, returns_within
from tests.paths import OnPath

T = [Timestamp(1700000000, i) for i in range(30)]


def _shards(tmp_path: Path) -> dict[str, FileOplogSource]:
    oplogs = {
        "a": [
            make.insert(T[1], {"_id": 1}),
            make.update(T[3], 1, {"u": {"x": 1}}),
            make.noop(T[9]),
        ],
        "b": [make.insert(T[1], {"_id": 2}), make.delete(T[2], 2), make.insert(T[5], {"_id": 3})],
    }
    sources = {}
    for name, entries in oplogs.items():
        path = tmp_path / f"{name}.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        sources[name] = FileOplogSource(name, str(path))
    return sources


def _token_of_a_missing_event(token: ResumeTokenData) -> ResumeTokenData:
    """A token at ``token``'s time for a delete no shard ever wrote."""
    return ResumeTokenData(
        cluster_time=token.cluster_time,
        uuid=token.uuid,
        event_identifier={"operationType": "delete", "documentKey": {"_id": 99}},
    )


def _keys(events: list[dict[str, Any]]) -> list[Any]:
    return [(e["operationType"], e["documentKey"]["_id"]) for e in events]


def test_iterating_yields_the_merged_stream(path: OnPath, tmp_path: Path) -> None:
    with path.watch(_shards(tmp_path), db="db", coll="coll") as stream:
        events = list(stream)
        assert not stream.alive
    assert _keys(events) == [
        ("insert", 1),
        ("insert", 2),
        ("delete", 2),
        ("update", 1),
        ("insert", 3),
    ]


def test_resume_token_follows_the_driver_caching_rules(path: OnPath, tmp_path: Path) -> None:
    stream = path.watch(_shards(tmp_path), db="db", coll="coll", batch_size=2)
    first = stream.try_next()
    assert first is not None
    assert stream.resume_token == first["_id"]  # not the last of its batch
    second = stream.try_next()
    assert second is not None
    # The last event of a batch: the batch's postBatchResumeToken, at or after the event.
    assert stream.resume_token is not None
    assert stream.resume_token["_data"] >= second["_id"]["_data"]
    rest = list(stream)
    assert len(rest) == 3
    assert stream.try_next() is None
    # Drained: shard b ended at its last event, the smallest final promise.
    assert stream.resume_token == rest[-1]["_id"]
    assert decode_token_document(stream.resume_token).cluster_time == T[5]
    stream.close()


def test_pipeline_match_filters_after_the_merge(path: OnPath, tmp_path: Path) -> None:
    pipeline = [{"$match": {"operationType": {"$in": ["insert", "update"]}}}]
    events = list(path.watch(_shards(tmp_path), pipeline=pipeline))
    assert _keys(events) == [("insert", 1), ("insert", 2), ("update", 1), ("insert", 3)]


def test_resume_after_an_emitted_token_gives_the_rest(path: OnPath, tmp_path: Path) -> None:
    events = list(path.watch(_shards(tmp_path)))
    resumed = list(path.watch(_shards(tmp_path), resume_after=events[1]["_id"]))
    assert [e["_id"] for e in resumed] == [e["_id"] for e in events[2:]]
    at_time = list(path.watch(_shards(tmp_path), start_at_operation_time=T[3]))
    assert _keys(at_time) == [("update", 1), ("insert", 3)]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"colour": "red"}, ConfigurationError, "unknown watch\\(\\) option"),
        ({"full_document": "updateLookup"}, ConfigurationError, "need a document lookup"),
        ({"resume_after": {"_data": "zz"}}, ResumeTokenError, "hex"),
        ({"batch_size": 0}, ConfigurationError, "batch_size"),
        ({"pipeline": [{"$group": {}}]}, ConfigurationError, "\\$group"),
        ({"show_migration_events": True}, ConfigurationError, "31123"),
    ],
)
def test_bad_options_fail_clearly(
    path: OnPath, tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        path.watch(_shards(tmp_path), **kwargs)


def test_live_sources_may_have_nothing_ready_yet(path: OnPath) -> None:
    result = SimulatedCluster(SimulationConfig(seed=3, shards=2, operations=60)).run()
    stream = path.watch(simulated_sources(result, seed=3, delay=0.6, max_batch=3))
    seen, empty_polls = [], 0
    deadline = Deadline("the simulated live shards' stream to end")
    while stream.alive:
        deadline.check(f"{len(seen)} events")
        event = stream.try_next()
        if event is None:
            empty_polls += 1
        else:
            seen.append(event)
    assert empty_polls > 0
    assert seen
    assert [e["_id"]["_data"] for e in seen] == sorted(e["_id"]["_data"] for e in seen)


class _NothingYet:
    """A live shard that never has anything ready."""

    def __init__(self, name: str) -> None:
        self.name = name

    def next_batch(self, max_entries: int) -> None:
        return None

    def fetch_entry(self, ts: Timestamp) -> None:
        return None

    def close(self) -> None:
        pass


def test_try_next_without_wait_looks_once_and_still_reads_the_whole_stream(path: OnPath) -> None:
    result = SimulatedCluster(SimulationConfig(seed=3, shards=2, operations=60)).run()
    # An await far past the deadline: only a try_next that does not wait returns in time.
    await_ms = int(DRAIN_S * 10_000)
    never_ready = {name: _NothingYet(name) for name in ("a", "b")}
    with path.watch(never_ready, max_await_time_ms=await_ms) as idle:
        assert returns_within(lambda: idle.try_next(wait=False), "try_next(wait=False)") is None
        assert idle.alive
    expected = list(path.watch(simulated_sources(result, seed=3, delay=0.0)))
    stream = path.watch(simulated_sources(result, seed=3, delay=0.6), max_await_time_ms=await_ms)
    seen, empty_polls = [], 0
    deadline = Deadline("the stream polled with wait=False to end")
    while stream.alive:
        deadline.check(f"{len(seen)} events")
        event = stream.try_next(wait=False)
        if event is None:
            empty_polls += 1
        else:
            seen.append(event)
    assert empty_polls > 0
    assert [e["_id"] for e in seen] == [e["_id"] for e in expected]


def test_resuming_from_an_event_no_shard_has_fails_naming_the_token(
    path: OnPath, tmp_path: Path
) -> None:
    events = list(path.watch(_shards(tmp_path)))
    token = decode_token_document(events[2]["_id"])
    missing = _token_of_a_missing_event(token)
    document = encode_token(missing).to_document()
    with pytest.raises(ResumeTokenNotFound, match=document["_data"]) as caught:
        list(path.watch(_shards(tmp_path), resume_after=document))
    assert caught.value.code == 280


def test_byte_identical_copies_of_the_resume_token_are_all_swallowed(
    path: OnPath, tmp_path: Path
) -> None:
    drop_a = [make.insert(T[1], {"_id": 1}), make.command(T[4], "db", {"drop": "other"})]
    drop_b = [make.command(T[4], "db", {"drop": "other"}), make.insert(T[6], {"_id": 6})]
    sources = {}
    for name, entries in (("a", drop_a), ("b", drop_b)):
        file = tmp_path / f"{name}.bson"
        file.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        sources[name] = lambda n=name, p=file: FileOplogSource(n, str(p))
    events = list(path.watch({n: f() for n, f in sources.items()}, db="db"))
    assert [e["operationType"] for e in events] == ["insert", "drop", "drop", "insert"]
    resumed = list(
        path.watch({n: f() for n, f in sources.items()}, db="db", resume_after=events[1]["_id"])
    )
    assert [e["operationType"] for e in resumed] == ["insert"]


def test_resume_token_before_the_first_batch_is_the_start_token(
    path: OnPath, tmp_path: Path
) -> None:
    # change-streams.md, "Updating the Cached Resume Token": when the stream is started,
    # cache startAfter if set, else resumeAfter; else it stays unset.
    events = list(path.watch(_shards(tmp_path)))
    resumed = path.watch(_shards(tmp_path), resume_after=events[1]["_id"])
    assert resumed.resume_token == events[1]["_id"]
    started = path.watch(_shards(tmp_path), start_after=events[2]["_id"])
    assert started.resume_token == events[2]["_id"]
    assert path.watch(_shards(tmp_path)).resume_token is None


def test_a_fatal_error_closes_the_stream(path: OnPath, tmp_path: Path) -> None:
    # pymongo ChangeStream.try_next: "Close the stream after a fatal error" (any error
    # that is not resumable; shardstream never resumes by itself), so alive turns False.
    events = list(path.watch(_shards(tmp_path)))
    token = decode_token_document(events[2]["_id"])
    missing = _token_of_a_missing_event(token)
    stream = path.watch(_shards(tmp_path), resume_after=encode_token(missing).to_document())
    with pytest.raises(ResumeTokenNotFound):
        stream.try_next()
    assert not stream.alive
    assert stream.try_next() is None
    with pytest.raises(StopIteration):
        next(stream)
