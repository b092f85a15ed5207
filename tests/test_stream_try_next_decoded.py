"""``ChangeStream.try_next_decoded`` and ``take_decoded``: fast-path events decoded by the
caller's callable.

Held to a twin stream over the same oplog files read with ``try_next`` / ``try_next_raw``:
on the fast path (shards delivering raw entries) the callable gets each event's bytes and its
result is what comes back, with ``resume_token`` following that result's ``_id``; on the
reference path (shards delivering dicts, or options that keep the reference path, such as a
resume token) the event's dict comes back and the callable is never called; a callable
that raises closes the stream, and its error propagates. ``take_decoded`` (its reference-path
converter the identity) gives what that many calls of ``try_next_decoded`` give, and leaves
``resume_token`` where they leave it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

import shardstream
from shardstream.change_stream import ChangeStream
from shardstream.cluster_sync.sync_event import SourceDocument, sync_event
from shardstream.errors import ConfigurationError
from shardstream.merger.raw.encoded_event import decode_event
from shardstream.oplog.file_source import FileOplogSource
from tests import factories as make
from tests.paths import strict

T = [Timestamp(1700000000, i) for i in range(10)]
IDS = [ObjectId(f"{i:024x}") for i in range(4)]  # ObjectId keys: what the fast path writes
OPLOGS = {
    "a": [
        make.insert(T[1], {"_id": IDS[1], "a": {"b": [1, 2]}}),
        make.update(T[3], IDS[1], {"u": {"x": 1}}),
        make.noop(T[9]),
    ],
    "b": [
        make.insert(T[1], {"_id": IDS[2]}),
        make.delete(T[2], IDS[2]),
        make.insert(T[5], {"_id": IDS[3]}),
    ],
}
EVENTS = 5


def _watch(tmp_path: Path, *, raw: bool, **kwargs: Any) -> ChangeStream:
    sources = {}
    for name, entries in OPLOGS.items():
        path = tmp_path / f"{name}.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        sources[name] = FileOplogSource(name, str(path), raw_entries=raw)
    return shardstream.watch(sources, batch_size=2, **kwargs)


def _steps(read: Callable[[], Any], stream: ChangeStream) -> list[tuple[Any, Any]]:
    steps = []
    while (event := read()) is not None:
        steps.append((event, stream.resume_token))
    return steps


class Recorder:
    """A decode callable that keeps what it was given and what it gave."""

    def __init__(self, decode: Callable[[bytes], dict[str, Any]]) -> None:
        self.decode = decode
        self.given: list[Any] = []
        self.gave: list[dict[str, Any]] = []

    def __call__(self, raw: bytes) -> dict[str, Any]:
        self.given.append(raw)
        self.gave.append(self.decode(raw))
        return self.gave[-1]


def test_a_fast_path_event_is_what_the_callable_makes_of_its_bytes(tmp_path: Path) -> None:
    with _watch(tmp_path, raw=True) as twin:
        raws = _steps(twin.try_next_raw, twin)
    with _watch(tmp_path, raw=True) as twin:
        expected = _steps(twin.try_next, twin)
    recorder = Recorder(decode_event)
    with _watch(tmp_path, raw=True) as stream:
        got = _steps(lambda: stream.try_next_decoded(recorder), stream)
    assert len(got) == EVENTS
    assert all(type(raw) is bytes for raw in recorder.given)
    assert recorder.given == [raw for raw, _ in raws]
    assert [event for event, _ in got] == recorder.gave
    assert all(event is made for (event, _), made in zip(got, recorder.gave, strict=True))
    assert strict(got) == strict(expected)  # the same events, the same tokens after each


def test_resume_token_follows_the_callables_id(tmp_path: Path) -> None:
    ids: list[dict[str, Any]] = []

    def marked(raw: bytes) -> dict[str, Any]:
        event = decode_event(raw)
        ids.append(event["_id"])
        return {**event, "_id": {"_data": "marked"}}

    with _watch(tmp_path, raw=True) as stream:
        assert stream.try_next_decoded(marked) is not None
        # Not the last of its batch of 2: the token is the _id decode gave.
        assert stream.resume_token == {"_data": "marked"}
        assert stream.try_next_decoded(marked) is not None
        # The last of its batch: the batch's postBatchResumeToken, as try_next gives it.
        assert stream.resume_token is not None
        assert stream.resume_token["_data"] >= ids[1]["_data"]


def test_the_sync_decoder_keeps_an_inserts_document_as_its_bytes(tmp_path: Path) -> None:
    with _watch(tmp_path, raw=True) as stream:
        # As the sync's batch reader calls it: without waiting.
        got = _steps(lambda: stream.try_next_decoded(sync_event, wait=False), stream)
    inserts = [event for event, _ in got if event["operationType"] == "insert"]
    assert len(inserts) == 3
    assert all(type(event["fullDocument"]) is SourceDocument for event in inserts)
    assert bson.decode(inserts[0]["fullDocument"].raw) == {"_id": IDS[1], "a": {"b": [1, 2]}}


@pytest.mark.parametrize("resume", [False, True], ids=["dict-sources", "resume-token"])
def test_a_reference_path_event_comes_as_its_dict(tmp_path: Path, resume: bool) -> None:
    # Shards delivering dicts are read by the reference readers; a resume token keeps the
    # reference path whatever the shards deliver (raw ones are then refused, below).
    kwargs: dict[str, Any] = {}
    if resume:
        with _watch(tmp_path, raw=False) as first:
            event = first.try_next()
            assert event is not None
            kwargs["resume_after"] = event["_id"]
    with _watch(tmp_path, raw=False, **kwargs) as twin:
        expected = _steps(twin.try_next, twin)

    def refuse(raw: bytes) -> dict[str, Any]:
        raise AssertionError("decode was called on the reference path")

    with _watch(tmp_path, raw=False, **kwargs) as stream:
        got = _steps(lambda: stream.try_next_decoded(refuse), stream)
    assert len(got) == (EVENTS - 1 if resume else EVENTS)
    assert strict(got) == strict(expected)
    assert all(type(event) is dict for event, _ in got)


def test_raw_sources_with_a_resume_token_are_refused(tmp_path: Path) -> None:
    # Shards that deliver raw entries are read by the fast readers only, which do not
    # compare tokens: with a resume token there is no fast path to take.
    with _watch(tmp_path, raw=True) as stream:
        event = stream.try_next()
        assert event is not None
    with pytest.raises(ConfigurationError, match="raw entries"):
        _watch(tmp_path, raw=True, resume_after=event["_id"])


def test_a_decode_that_raises_closes_the_stream(tmp_path: Path) -> None:
    class Corrupt(Exception):
        pass

    def fail(raw: bytes) -> dict[str, Any]:
        raise Corrupt(raw[:4])

    stream = _watch(tmp_path, raw=True)
    first = stream.try_next_decoded(decode_event)
    assert first is not None
    assert stream.resume_token == first["_id"]
    assert stream.alive
    with pytest.raises(Corrupt):
        stream.try_next_decoded(fail)
    assert not stream.alive
    assert stream.resume_token == first["_id"]  # not past the event it could not read
    assert stream.try_next() is None
    assert stream.try_next_decoded(decode_event) is None
    stream.close()  # closing again is harmless


def _as_is(document: dict[str, Any]) -> dict[str, Any]:
    """take_decoded's converter of a reference-path event: the dict itself, as
    try_next_decoded gives it."""
    return document


@pytest.mark.parametrize("raw", [True, False], ids=["fast-path", "reference-path"])
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_take_decoded_is_that_many_calls_of_try_next_decoded(
    tmp_path: Path, raw: bool, size: int
) -> None:
    # batch_size 2: takes of 3 and 7 cross the merge's batches (and their PBRTs).
    with _watch(tmp_path, raw=raw) as twin:
        expected = _steps(lambda: twin.try_next_decoded(decode_event, wait=False), twin)
    taken: list[tuple[list[dict[str, Any]], Any]] = []
    with _watch(tmp_path, raw=raw) as stream:
        while events := stream.take_decoded(decode_event, size, _as_is):
            assert len(events) <= size
            taken.append((events, stream.resume_token))
        assert stream.take_decoded(decode_event, size, _as_is) == []
    assert [event for events, _ in taken for event in events] == [e for e, _ in expected]
    ends = [sum(len(events) for events, _ in taken[: n + 1]) for n in range(len(taken))]
    assert strict([token for _, token in taken]) == strict([expected[e - 1][1] for e in ends])
    assert all(len(events) == size for events, _ in taken[:-1])  # files: all is ready


def test_a_take_whose_decode_raises_closes_the_stream(tmp_path: Path) -> None:
    seen: list[bytes] = []

    def fail_second(raw: bytes) -> dict[str, Any]:
        seen.append(raw)
        if len(seen) == 2:
            raise ValueError("corrupt")
        return decode_event(raw)

    stream = _watch(tmp_path, raw=True)
    with pytest.raises(ValueError, match="corrupt"):
        stream.take_decoded(fail_second, 3, _as_is)
    assert not stream.alive
    assert stream.take_decoded(decode_event, 3, _as_is) == []
