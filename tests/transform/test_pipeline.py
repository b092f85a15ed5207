"""The shard pipeline through the public API: start points, resume, transactions, images.

On both paths (the ``path`` fixture, tests/paths.py); a stream with images is the
reference's alone (the fast pipeline takes no lookup).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import bson
import pytest
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenNotFound, TransformError
from shardstream.resume_token import decode_token
from shardstream.transform import (
    ChangeEvent,
    ChangeStreamOptions,
    ShardPipeline,
    event_to_json,
)
from tests import factories as make
from tests.paths import OnPath

T = [Timestamp(1700000000, i) for i in range(40)]
COLL = ChangeStreamOptions(db="db", coll="coll")


def _run(
    path: OnPath,
    entries: Sequence[Mapping[str, Any]],
    options: ChangeStreamOptions = COLL,
    **kw: Any,
) -> list[ChangeEvent]:
    return path.transform(entries, options, **kw)


def _types(events: list[ChangeEvent]) -> list[str]:
    return [event.operation_type for event in events]


def _crud() -> list[dict[str, Any]]:
    return [
        make.insert(T[1], {"_id": 1, "a": 1}),
        make.update(T[2], 1, {"u": {"a": 2}}),
        make.noop(T[3]),
        make.delete(T[4], 1),
        make.insert(T[5], {"_id": 2}),
    ]


def test_start_at_operation_time_skips_older_entries(path: OnPath) -> None:
    events = _run(path, _crud(), COLL.with_options(start_at_operation_time=T[2]))
    assert _types(events) == ["update", "delete", "insert"]


def test_resume_after_swallows_up_to_and_including_the_token(path: OnPath) -> None:
    first = _run(path, _crud())
    token = first[1].token_data
    resumed = _run(path, _crud(), COLL.with_options(resume_after=token))
    assert [e.token for e in resumed] == [e.token for e in first[2:]]


def test_resume_after_a_token_whose_event_is_gone_fails_naming_it(path: OnPath) -> None:
    token = _run(path, _crud())[1].token_data
    entries = [e for e in _crud() if e["ts"] != T[2]]
    with pytest.raises(ResumeTokenNotFound, match="resume token was not found") as caught:
        _run(path, entries, COLL.with_options(resume_after=token))
    assert caught.value.code == 280


def test_resumed_stream_keeps_the_old_token_version_until_past_the_token(path: OnPath) -> None:
    v1 = COLL.with_options(token_version=1)
    entries = [
        make.insert(T[1], {"_id": 1}),
        make.apply_ops(T[2], [make.inner(make.insert(T[0], {"_id": n})) for n in (2, 3, 4)]),
        make.insert(T[3], {"_id": 5}),
    ]
    old = _run(path, entries, v1)
    assert {e.token_data.version for e in old} == {1}
    resumed = _run(path, entries, COLL.with_options(resume_after=old[1].token_data))
    # Same clusterTime, later txnOpIndex: past the token, so the default version (2) applies.
    assert [(e.token_data.txn_op_index, e.token_data.version) for e in resumed] == [
        (1, 2),
        (2, 2),
        (0, 2),
    ]
    # The shard half of a merged stream hands the token's own event on (mongos swallows it):
    # it must come out byte-identical to the client's v1 token.
    shard = ShardPipeline(COLL.with_options(resume_after=old[1].token_data), single_shard=False)
    regenerated = [event for entry in entries for event in shard.process(entry)]
    assert regenerated[0].token == old[1].token
    assert [e.token_data.version for e in regenerated] == [1, 2, 2, 2]


def test_invalidate_ends_the_stream_and_start_after_continues_past_it(path: OnPath) -> None:
    entries = [
        make.insert(T[1], {"_id": 1}),
        make.command(T[2], "db", {"drop": "coll"}),
        make.insert(T[3], {"_id": 2}),
    ]
    events = _run(path, entries)
    assert _types(events) == ["insert", "drop", "invalidate"]
    invalidate = events[-1].token_data
    assert invalidate.from_invalidate
    assert events[-1].token.data > events[-2].token.data
    with pytest.raises(ConfigurationError, match="260"):
        COLL.with_options(resume_after=invalidate)
    after = _run(path, entries, COLL.with_options(start_after=invalidate))
    assert _types(after) == ["insert"]
    assert after[0].document["documentKey"] == {"_id": 2}


def test_database_stream_is_invalidated_only_by_drop_database(path: OnPath) -> None:
    database = ChangeStreamOptions(db="db")
    entries = [
        make.command(T[1], "db", {"drop": "coll"}),
        make.command(T[2], "db", {"dropDatabase": 1}),
        make.insert(T[3], {"_id": 1}),
    ]
    assert _types(_run(path, entries, database)) == ["drop", "dropDatabase", "invalidate"]
    assert _types(_run(path, entries, ChangeStreamOptions())) == ["drop", "dropDatabase", "insert"]


def test_transaction_begun_before_the_start_is_read_back_through_history(path: OnPath) -> None:
    first = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))], partial=True)
    last = make.apply_ops(T[3], [make.inner(make.insert(T[0], {"_id": 2}))], prev=T[1])
    options = COLL.with_options(start_at_operation_time=T[2])

    class History:
        def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
            return first if ts == T[1] else None

    events = _run(path, [last], options, history=History())
    assert [e.document["documentKey"] for e in events] == [{"_id": 1}, {"_id": 2}]
    assert [e.token_data.txn_op_index for e in events] == [0, 1]
    assert {e.document["clusterTime"] for e in events} == {T[3]}
    with pytest.raises(TransformError, match="prevOpTime") as caught:
        _run(path, [last], options)
    assert caught.value.ts == T[3]


def test_aborted_prepared_transaction_emits_nothing(path: OnPath) -> None:
    prepare = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))], prepare=True)
    abort = {
        **make.command(T[2], "admin", {"abortTransaction": 1}),
        "prevOpTime": {"ts": T[1], "t": Int64(1)},
    }
    assert _run(path, [prepare, abort, make.insert(T[3], {"_id": 9})])[0].document[
        "documentKey"
    ] == {"_id": 9}


def test_prepared_transaction_events_take_the_commit_entry_time(path: OnPath) -> None:
    prepare = make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))], prepare=True)
    events = _run(path, [prepare, make.commit(T[5], T[1], T[4])])
    assert events[0].document["clusterTime"] == T[5]
    assert list(events[0].document)[:3] == ["txnNumber", "lsid", "_id"]
    shown = _run(
        path,
        [prepare, make.commit(T[5], T[1], T[4])],
        COLL.with_options(show_commit_timestamp=True),
    )
    assert shown[0].document["commitTimestamp"] == T[4]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**make.insert(T[1], {"_id": 1}), "op": "x"}, "expected op to be one of"),
        ({**make.insert(T[1], {"_id": 1}), "wall": "yesterday"}, "expected wall to be a Date"),
        ({**make.insert(T[1], {"_id": 1}), "ui": None}, "collection UUID"),
        ({**make.insert(T[1], {"_id": 1}), "o": [1]}, "expected o to be a document"),
        (
            make.apply_ops(T[1], [make.noop(T[0], {"shardCollection": "db.coll"}, ns="db.coll")]),
            "no-op",
        ),
        (make.update(T[1], 1, {"x": {}}), "4770503"),
    ],
)
def test_malformed_entries_fail_naming_their_ts(
    path: OnPath, entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(TransformError, match=message) as caught:
        _run(path, [entry], ChangeStreamOptions())
    assert caught.value.ts == T[1]


def test_expanded_events_are_hidden_unless_asked_for(path: OnPath) -> None:
    entries = [make.command(T[1], "db", {"create": "coll"}), make.insert(T[2], {"_id": 1})]
    assert _types(_run(path, entries)) == ["insert"]
    shown = _run(path, entries, COLL.with_options(show_expanded_events=True))
    assert _types(shown) == ["create", "insert"]
    assert shown[0].document["nsType"] == "collection"
    older = _run(path, entries, COLL.with_options(show_expanded_events=True, server_version=(7, 0)))
    assert "nsType" not in older[0].document


def test_server_6_0_uses_v1_tokens_and_legacy_new_shard_name(path: OnPath) -> None:
    new_shard = make.noop(
        T[1],
        {"migrateChunkToNewShard": "db.coll", "fromShardId": "a", "toShardId": "b"},
        ns="db.coll",
    )
    merged = ChangeStreamOptions(merged_by_router=True)
    assert _types(_run(path, [new_shard], merged)) == ["migrateChunkToNewShard"]
    old = _run(path, [new_shard], merged.with_options(server_version=(6, 0)))
    assert _types(old) == ["kNewShardDetected"]
    assert old[0].token_data.version == 1
    assert _run(path, [new_shard], ChangeStreamOptions()) == []


class Images:
    """A lookup over dicts: current documents by _id, pre-images by (ts, applyOps index)."""

    def __init__(self) -> None:
        self.current: dict[Any, Mapping[str, Any]] = {1: {"_id": 1, "a": 2, "b": 0}}
        self.before: dict[tuple[Timestamp, int], Mapping[str, Any]] = {
            (T[2], 0): {"_id": 1, "a": 1}
        }

    def current_document(
        self, db: str, coll: str, document_key: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        return self.current.get(document_key["_id"])

    def pre_image(
        self, collection_uuid: Any, ts: Timestamp, apply_ops_index: int
    ) -> Mapping[str, Any] | None:
        return self.before.get((ts, apply_ops_index))


def test_images_need_a_lookup(path: OnPath) -> None:
    with pytest.raises(ConfigurationError, match="need a document lookup"):
        _run(path, _crud(), COLL.with_options(full_document="updateLookup"))


def test_update_lookup_fills_the_slot_after_wall_time_and_pre_image_goes_last(path: OnPath) -> None:
    options = COLL.with_options(
        full_document="updateLookup", full_document_before_change="whenAvailable"
    )
    update = _run(path, _crud(), options, lookup=Images())[1]
    assert list(update.document) == [
        "_id",
        "operationType",
        "clusterTime",
        "wallTime",
        "fullDocument",
        "ns",
        "documentKey",
        "updateDescription",
        "fullDocumentBeforeChange",
    ]
    assert update.document["fullDocument"] == {"_id": 1, "a": 2, "b": 0}
    assert update.document["fullDocumentBeforeChange"] == {"_id": 1, "a": 1}
    delete = _run(path, _crud(), options, lookup=Images())[2]
    assert delete.document["fullDocumentBeforeChange"] is None


def test_required_images_fail_when_missing(path: OnPath) -> None:
    options = COLL.with_options(full_document_before_change="required")
    with pytest.raises(TransformError, match="require a pre-image") as caught:
        _run(path, _crud(), options, lookup=Images())
    assert caught.value.code == 47


def test_when_available_post_image_applies_the_update_to_the_pre_image(path: OnPath) -> None:
    options = COLL.with_options(full_document="whenAvailable")
    update = _run(path, _crud(), options, lookup=Images())[1]
    assert update.document["fullDocument"] == {"_id": 1, "a": 2}


def test_raw_update_description_is_the_oplog_update(path: OnPath) -> None:
    events = _run(path, _crud(), COLL.with_options(show_raw_update_description=True))
    assert events[1].document["rawUpdateDescription"] == {"$v": 2, "diff": {"u": {"a": 2}}}


def test_raw_bson_entries_give_the_same_events_as_dicts(path: OnPath) -> None:
    raw = [RawBSONDocument(bson.encode(entry)) for entry in _crud()]
    assert [event_to_json(e.document) for e in _run(path, raw)] == [
        event_to_json(e.document) for e in _run(path, _crud())
    ]


def test_an_event_over_16_mib_is_split_into_fragments(path: OnPath) -> None:
    images = Images()
    images.current[1] = {"_id": 1, "a": "x" * (9 << 20)}
    images.before[(T[2], 0)] = {"_id": 1, "a": "y" * (9 << 20)}
    options = COLL.with_options(
        split_large_events=True,
        full_document="updateLookup",
        full_document_before_change="whenAvailable",
    )
    events = _run(path, _crud()[:2], options, lookup=images)
    assert _types(events) == ["insert", "update", "update"]
    fragments = [e.document for e in events[1:]]
    assert [d["splitEvent"] for d in fragments] == [
        {"fragment": 1, "of": 2},
        {"fragment": 2, "of": 2},
    ]
    assert [decode_token(e.token).fragment_num for e in events[1:]] == [0, 1]
    assert events[1].token_data.cluster_time == T[2]
    joined = {k: v for d in fragments for k, v in d.items() if k not in ("_id", "splitEvent")}
    assert joined["fullDocument"] == images.current[1]
    assert joined["fullDocumentBeforeChange"] == images.before[(T[2], 0)]
