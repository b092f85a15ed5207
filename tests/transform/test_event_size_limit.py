"""Events the server could not serialize fail the stream (BSONObjectTooLarge, 10334).

server: PlanExecutorPipeline::_trySerializeToBson builds each event as a BSONObj, capped
by BSONObj::DefaultSizeTrait at BSONObjMaxInternalSize (16 MiB + 16 KiB); a shard of a
sharded cluster serializes it with its $sortKey metadata (toBsonWithMetaData).  Unless
$changeStreamSplitLargeEvent is in the pipeline, a larger event fails the stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.transform import ChangeStreamOptions, transform_oplog
from shardstream.transform.event_bson import encode_event_document
from shardstream.transform.event_size_limit import (
    BSON_OBJ_MAX_INTERNAL_SIZE,
    check_written_events,
    sort_key_size,
    too_large_at,
)
from tests import factories as make
from tests.transform.replay_paths import (
    MERGE_PATHS,
    assert_refused,
    run_paths,
    split_events,
)

LIMIT = BSON_OBJ_MAX_INTERNAL_SIZE
KEY = "k" * 10_000  # a large _id: the token's hex doubles it, the documentKey repeats it


def _insert(padding: int) -> dict[str, Any]:
    return make.insert(Timestamp(10, 2), {"_id": KEY, "s": "p" * padding})


def _oplog(padding: int) -> list[dict[str, Any]]:
    return [
        make.insert(Timestamp(10, 1), {"_id": ObjectId("65f0000000000000000000a1")}),
        _insert(padding),
    ]


def _event_size(padding: int) -> int:
    """The replica-set event's BSON size for the insert with ``padding`` (as the API builds it)."""
    event = next(iter(transform_oplog([_insert(padding)], ChangeStreamOptions())))
    return len(encode_event_document(event.document))


def _padding_for_event_size(size: int) -> int:
    """The padding that makes the insert's event exactly ``size`` bytes (size is linear in it)."""
    padding = 1000
    return padding + size - _event_size(padding)


def test_an_event_over_the_limit_fails_every_path(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    padding = _padding_for_event_size(LIMIT + 1)
    assert len(bson.encode(_insert(padding))) <= LIMIT  # the entry itself is a valid one
    verdicts = run_paths(tmp_path, _oplog(padding), capsysbinary)
    assert_refused(verdicts, "[server error 10334]", "Timestamp(10, 2)")
    # Expanded events (collectionUUID) and a shard's (its $sortKey) are larger still.
    for path in ("fast", "fast-json", "reference"):
        assert f"got {LIMIT + 1} bytes" in verdicts[path].message


def test_an_event_at_the_limit_passes_alone_but_not_with_its_sort_key(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """A replica set sends the bare event; a shard adds $sortKey: [token] to it."""
    padding = _padding_for_event_size(LIMIT)
    verdicts = run_paths(tmp_path, _oplog(padding), capsysbinary, ("fast", "reference"))
    for verdict in verdicts.values():
        assert verdict.code == 0, verdict.err
        assert [len(event) for event in split_events(verdict.out)][1] == LIMIT
    merged = run_paths(tmp_path, _oplog(padding), capsysbinary, MERGE_PATHS, name="merged")
    assert_refused(merged, "change event with its $sortKey", "[server error 10334]")


def test_with_split_large_events_the_split_stage_decides_instead() -> None:
    """server: with $changeStreamSplitLargeEvent, events over 16 MiB + 8 KiB go to
    splitChangeEvent, which fails with 7182500 when one field (here fullDocument) cannot
    fit in a fragment; the 10334 check is never reached (fragments always fit)."""
    padding = _padding_for_event_size(LIMIT + 1)
    with pytest.raises(TransformError) as split:
        list(transform_oplog([_insert(padding)], ChangeStreamOptions(split_large_events=True)))
    assert split.value.code == 7182500
    with pytest.raises(TransformError) as whole:
        list(transform_oplog([_insert(padding)], ChangeStreamOptions()))
    assert whole.value.code == 10334


def test_the_sort_key_size_is_the_metadata_field_size() -> None:
    for data in ("82AB", "82" * 300):
        element = bson.encode({"$sortKey": [{"_data": data}]})[4:-1]
        assert sort_key_size(data) == len(element)


def test_too_large_at_finds_the_first_event_over_the_limit() -> None:
    small, big = b"x" * 10, b"x" * (LIMIT + 1)
    assert too_large_at([small, small], None, 0) == -1
    assert too_large_at([small, big, big], None, 0) == 1
    assert too_large_at([big, small, big], None, 1) == 2
    assert too_large_at([big], None, 1) == -1
    # With sort keys: an event that fits alone but not with its $sortKey.
    edge = b"x" * (LIMIT - 40)
    assert too_large_at([edge], None, 0) == -1
    assert too_large_at([small, edge], [b"82", b"82AB000000"], 0) == 1
    assert too_large_at([edge], [b""], 0) == -1


def test_written_events_are_refused_with_their_cluster_time() -> None:
    event = bson.encode({"_id": {"_data": "82"}, "clusterTime": Timestamp(7, 3), "s": "x" * LIMIT})
    with pytest.raises(TransformError) as raised:
        check_written_events([b"\x05\x00\x00\x00\x00", event], None, 0)
    assert raised.value.code == 10334
    assert raised.value.ts == Timestamp(7, 3)
    check_written_events([event], None, 1)  # only events from start on are checked
