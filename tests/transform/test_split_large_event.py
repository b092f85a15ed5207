"""$changeStreamSplitLargeEvent: sizes, fragment layout, tokens, errors and resuming.

Server references (mongodb/mongo): change_stream_split_event_helpers_test.cpp @1c287af4 (named
``Helpers: <test>`` below) and jstests/change_streams/split_large_event.js @0127ea7f (``jstest``).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import bson
import pytest
from bson.int64 import Int64
from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import ConfigurationError, TransformError
from shardstream.resume_token import (
    ResumeToken,
    ResumeTokenData,
    decode_token_document,
    encode_token,
    event_token_data,
    high_water_mark,
)
from shardstream.transform.event_size_limit import BSON_OBJ_MAX_USER_SIZE
from shardstream.transform.stages.check_resumability import ResumeStatus, compare_with_resume_token
from shardstream.transform.stages.split_large_event import (
    MAX_CHANGE_EVENT_SIZE,
    SplitLargeEventStage,
    split_event,
    split_large_event,
)

TIME = Timestamp(1700000000, 5)
UUID = uuid.UUID("0123abcd-4567-489a-8bcd-ef0123456789")
TOKEN_DATA = event_token_data(
    cluster_time=TIME, operation_type="update", uuid=UUID, document_key={"_id": 1}
)
TOKEN_DOC = encode_token(TOKEN_DATA).to_document()
TOKEN_SIZE = len(bson.encode(TOKEN_DOC))
FATAL = 280  # ChangeStreamFatalError


def field_size(name: str, value: Any) -> int:
    """BSON element size, computed independently of the module."""
    return len(bson.encode({name: value})) - 5


def sort_key_size(token_doc: dict[str, Any]) -> int:
    return field_size("$sortKey", [token_doc])


def fragment_overhead(fragment_num: int) -> int:
    """Size of an empty fragment and its $sortKey (the server fixture's minFragmentSize)."""
    token_doc = encode_token(
        dataclasses.replace(TOKEN_DATA, fragment_num=fragment_num)
    ).to_document()
    empty = {"_id": token_doc, "splitEvent": {"fragment": fragment_num + 1, "of": 1}}
    return len(bson.encode(empty)) + sort_key_size(token_doc)


MIN_FRAGMENT_SIZE = fragment_overhead(1)


def update_event(before: int = 300, after: int = 400, updated: int = 200) -> dict[str, Any]:
    """An update event with images, shaped like the jstest's."""
    return {
        "_id": TOKEN_DOC,
        "operationType": "update",
        "clusterTime": TIME,
        "wallTime": datetime.datetime(2023, 11, 14, tzinfo=datetime.UTC),
        "ns": {"db": "test", "coll": "c"},
        "documentKey": {"_id": 1},
        "updateDescription": {"updatedFields": {"a": "u" * updated}, "removedFields": []},
        "fullDocument": {"_id": 1, "a": "y" * after},
        "fullDocumentBeforeChange": {"_id": 1, "a": "x" * before},
    }


def full_size(event: dict[str, Any]) -> int:
    """What the stage compares with its limit on a shard: event + $sortKey + token."""
    return len(bson.encode(event)) + sort_key_size(TOKEN_DOC) + TOKEN_SIZE


def fragment_token(fragment: dict[str, Any]) -> ResumeTokenData:
    return decode_token_document(fragment["_id"])


# A limit that splits update_event() into 3 fragments: the small fields with the update
# description, then the pre-image, then the post-image.
LIMIT = TOKEN_SIZE + fragment_overhead(2) + field_size("fullDocument", {"_id": 1, "a": "y" * 400})


# --- splitChangeEvent, mirroring the helpers' unit tests -------------------------------------


def test_empty_event_throws() -> None:  # Helpers: EmptyDocThrows
    with pytest.raises(TransformError) as info:
        split_event({}, TOKEN_DATA, MIN_FRAGMENT_SIZE)
    assert info.value.code == 7182502


def test_event_with_solely_id_throws() -> None:  # Helpers: DocWithSolelyIdThrows
    with pytest.raises(TransformError, match="solely '_id' field") as info:
        split_event({"_id": 1}, TOKEN_DATA, MIN_FRAGMENT_SIZE)
    assert info.value.code == 7182502


def test_basic_split_with_single_fragment() -> None:  # Helpers: BasicSplitWithSingleFragment
    size = field_size("a", 123)
    fragments = split_event({"a": 123, "b": 321}, TOKEN_DATA, MIN_FRAGMENT_SIZE + 2 * size)
    assert fragments == [
        {"_id": fragments[0]["_id"], "splitEvent": {"fragment": 1, "of": 1}, "a": 123, "b": 321}
    ]


def test_replaces_id_with_fragment_token() -> None:  # Helpers: ReplacesIdWithFragmentResumeToken
    fragments = split_event(
        {"_id": 1, "a": 123}, TOKEN_DATA, MIN_FRAGMENT_SIZE + field_size("a", 1)
    )
    assert len(fragments) == 1
    assert fragment_token(fragments[0]) == dataclasses.replace(TOKEN_DATA, fragment_num=0)


def test_oversized_fragment_throws() -> None:  # Helpers: OversizedFragmentThrows
    size = field_size("a", "very_long_string")
    limit = MIN_FRAGMENT_SIZE + size - 5
    # Fragment 0's token is 2 bytes shorter than fragment 1's, and it appears twice (_id, $sortKey).
    actual = fragment_overhead(0) + size
    assert actual == MIN_FRAGMENT_SIZE - 4 + size
    message = (
        f"Splitting change event failed: fragment size {actual} is greater than maximum allowed "
        f"fragment size {limit}"
    )
    with pytest.raises(TransformError) as info:
        split_event({"a": "very_long_string"}, TOKEN_DATA, limit)
    assert info.value.code == 7182500
    assert str(info.value) == f"{message} [server error 7182500]"


def test_split_at_max_size_boundary() -> None:  # Helpers: SplitEventAtMaxSizeBoundary
    # Equal sizes: the name that sorts first goes first, whatever the event's order.
    fragments = split_event(
        {"b": 321, "a": 123}, TOKEN_DATA, MIN_FRAGMENT_SIZE + field_size("b", 1)
    )
    assert [list(f)[2:] for f in fragments] == [["a"], ["b"]]


def test_fields_ordered_in_ascending_size() -> (
    None
):  # Helpers: SplitEventFieldsOrderedInAscendingSize
    event = {"a": "unittesting", "b": "hello"}
    fragments = split_event(event, TOKEN_DATA, MIN_FRAGMENT_SIZE + field_size("a", "unittesting"))
    assert [f["splitEvent"] for f in fragments] == [
        {"fragment": 1, "of": 2},
        {"fragment": 2, "of": 2},
    ]
    assert (fragments[0]["b"], fragments[1]["a"]) == ("hello", "unittesting")


def test_can_skip_first_fragments() -> None:  # Helpers: CanSkipFirstNFragments
    event = {"a": "unittesting", "b": "hello"}
    limit = MIN_FRAGMENT_SIZE + field_size("a", "unittesting")
    skipped = split_event(event, TOKEN_DATA, limit, skip_first_fragments=1)
    assert [f["splitEvent"] for f in skipped] == [{"fragment": 2, "of": 2}]
    assert split_event(event, TOKEN_DATA, limit, skip_first_fragments=2) == []


def test_field_names_tie_break_by_bytes() -> None:
    # std::string compares bytes: "Z" (0x5A) before "a" (0x61); field sizes are equal.
    fragments = split_event({"a": 1, "Z": 2}, TOKEN_DATA, 10**6)
    assert list(fragments[0])[2:] == ["Z", "a"]


def test_v1_token_cannot_carry_fragment_num() -> None:  # resume_token.cpp uassert 7182504
    v1 = event_token_data(cluster_time=TIME, operation_type="update", version=1, uuid=UUID)
    with pytest.raises(TransformError, match="version 1 cannot have a fragmentNum") as info:
        split_event({"a": 1}, v1, 10**6)
    assert info.value.code == 7182504


# --- the stage: threshold, layout, tokens, sizes -----------------------------------------------


def test_small_event_passes_unchanged() -> None:  # jstest: not over the limit, nothing changes
    event = update_event()
    assert split_large_event(event, TOKEN_DATA)[0] is event


@pytest.mark.parametrize(
    ("with_metadata", "overhead"),
    [(True, sort_key_size(TOKEN_DOC) + TOKEN_SIZE), (False, TOKEN_SIZE)],
)
def test_threshold_is_event_plus_metadata_plus_token(with_metadata: bool, overhead: int) -> None:
    event = update_event()
    limit = len(bson.encode(event)) + overhead
    assert split_large_event(event, TOKEN_DATA, max_size=limit, with_metadata=with_metadata) == [
        event
    ]
    split = split_large_event(event, TOKEN_DATA, max_size=limit - 1, with_metadata=with_metadata)
    assert "splitEvent" in split[0]


def test_threshold_without_token_reservation() -> None:  # the 7.0 line compares the bare size
    event = update_event()
    limit = len(bson.encode(event)) + sort_key_size(TOKEN_DOC)
    assert SplitLargeEventStage(max_size=limit, reserve_token_size=False).process(
        event, TOKEN_DATA
    ) == [event]


def test_server_limit_is_16_mib_plus_8_kib() -> None:
    assert MAX_CHANGE_EVENT_SIZE == 16 * 1024 * 1024 + 8 * 1024


def test_fragment_field_order() -> None:
    event = update_event()
    fragments = split_large_event(event, TOKEN_DATA, max_size=LIMIT)
    assert len(fragments) == 3
    for fragment in fragments:
        assert list(fragment)[:2] == ["_id", "splitEvent"]
        assert list(fragment["splitEvent"]) == ["fragment", "of"]
        sizes = [(field_size(k, v), k.encode()) for k, v in fragment.items()][2:]
        assert sizes == sorted(sizes)
    assert list(fragments[1])[2:] == ["fullDocumentBeforeChange"]
    assert list(fragments[2])[2:] == ["fullDocument"]


def test_fragment_tokens_are_0_based_and_split_event_1_based() -> None:
    fragments = split_large_event(update_event(), TOKEN_DATA, max_size=LIMIT)
    previous = encode_token(TOKEN_DATA)
    for index, fragment in enumerate(fragments):
        data = fragment_token(fragment)
        assert data.fragment_num == index
        assert fragment["splitEvent"] == {"fragment": index + 1, "of": len(fragments)}
        assert dataclasses.replace(data, fragment_num=None) == TOKEN_DATA
        token = ResumeToken.from_document(fragment["_id"])
        assert token > previous  # fragments merge after the whole event's token, in order
        previous = token


def test_every_fragment_fits_the_limit() -> None:
    for fragment in split_large_event(update_event(), TOKEN_DATA, max_size=LIMIT):
        # The stage leaves room for the token (postBatchResumeToken) and counts $sortKey.
        with_sort_key = len(bson.encode(fragment)) + sort_key_size(fragment["_id"])
        assert with_sort_key <= LIMIT - TOKEN_SIZE


def test_reassembled_fragments_give_back_the_event() -> None:  # jstest: reconstructSplitEvent
    event = update_event()
    joined: dict[str, Any] = {}
    for fragment in split_large_event(event, TOKEN_DATA, max_size=LIMIT):
        joined.update((k, v) for k, v in fragment.items() if k not in ("_id", "splitEvent"))
    assert joined == {k: v for k, v in event.items() if k != "_id"}
    # The fields come back smallest first, not in the event's order: the server sorts them.
    assert list(joined) != [k for k in event if k != "_id"]
    assert list(joined) == sorted(joined, key=lambda k: (field_size(k, joined[k]), k.encode()))


def test_unsplittable_field_fails_the_stage() -> None:
    event = update_event(after=2000)
    with pytest.raises(TransformError, match="Splitting change event failed") as info:
        split_large_event(event, TOKEN_DATA, max_size=LIMIT)
    assert info.value.code == 7182500


def test_real_limit_with_an_18_mib_event() -> None:  # the one full-size test
    event = update_event(before=9 * 1024 * 1024, after=9 * 1024 * 1024, updated=10)
    fragments = split_large_event(event, TOKEN_DATA)
    assert [f["splitEvent"]["of"] for f in fragments] == [2, 2]
    for fragment in fragments:
        assert len(bson.encode(fragment)) <= BSON_OBJ_MAX_USER_SIZE + 8 * 1024 - TOKEN_SIZE


@given(
    st.dictionaries(
        st.text("abcXYZ_", min_size=1, max_size=4), st.integers(0, 200), min_size=1, max_size=12
    ),
    st.integers(0, 300),
)
def test_greedy_packing_properties(lengths: dict[str, int], slack: int) -> None:
    event: dict[str, Any] = {"_id": TOKEN_DOC, **{k: "v" * n for k, n in lengths.items()}}
    largest = max(field_size(k, v) for k, v in event.items() if k != "_id")
    limit = TOKEN_SIZE + fragment_overhead(100) + largest + slack
    fragments = split_large_event(event, TOKEN_DATA, max_size=limit, with_metadata=False)
    if fragments == [event]:
        assert len(bson.encode(event)) + TOKEN_SIZE <= limit
        return
    order = [k for f in fragments for k in list(f)[2:]]
    assert order == sorted(lengths, key=lambda k: (field_size(k, event[k]), k.encode()))
    for index, fragment in enumerate(fragments):
        used = len(bson.encode(fragment)) + sort_key_size(fragment["_id"])
        assert used <= limit - TOKEN_SIZE
        if index + 1 < len(fragments):  # greedy: the next field would not have fitted
            name = list(fragments[index + 1])[2]
            assert used + field_size(name, event[name]) > limit - TOKEN_SIZE


# --- resuming from a fragment token ------------------------------------------------------------


@pytest.mark.parametrize("resumed", [0, 1, 2])
def test_resume_skips_fragments_before_the_resumed_one(resumed: int) -> None:
    # jstest: resume from the second-last fragment and see only the last one.
    event = update_event()
    fragments = split_large_event(event, TOKEN_DATA, max_size=LIMIT)
    client = fragment_token(fragments[resumed])
    # The stage regenerates the resumed fragment; EnsureResumeTokenPresent swallows it on mongos.
    stage = SplitLargeEventStage(client, max_size=LIMIT)
    assert stage.process(event, TOKEN_DATA) == fragments[resumed:]
    client_view = SplitLargeEventStage(client, max_size=LIMIT, swallow_resume_point=True)
    assert client_view.process(event, TOKEN_DATA) == fragments[resumed + 1 :]


def test_resume_into_a_different_split_fails() -> None:  # jstest: $project: {"fullDocument.a": 0}
    event = update_event()
    last = fragment_token(split_large_event(event, TOKEN_DATA, max_size=LIMIT)[-1])
    smaller = {k: v for k, v in event.items() if k != "fullDocument"}
    with pytest.raises(TransformError, match="produced a different split") as info:
        SplitLargeEventStage(last, max_size=LIMIT).process(smaller, TOKEN_DATA)
    assert info.value.code == FATAL


def test_resume_into_an_event_too_small_to_split_fails() -> None:  # jstest: no pre/post images
    event = update_event()
    last = fragment_token(split_large_event(event, TOKEN_DATA, max_size=LIMIT)[-1])
    small = {k: v for k, v in event.items() if not k.startswith("fullDocument")}
    with pytest.raises(TransformError, match="not large enough to be split") as info:
        SplitLargeEventStage(last, max_size=LIMIT).process(small, TOKEN_DATA)
    assert info.value.code == FATAL


def test_resume_point_on_another_shard_skips_nothing() -> None:
    # Another document at the same time (a token of the same size, so LIMIT still fits).
    later = _with(event_identifier={"operationType": "update", "documentKey": {"_id": 2}})
    client = dataclasses.replace(TOKEN_DATA, fragment_num=1)
    stage = SplitLargeEventStage(client, max_size=LIMIT)
    fragments = stage.process(update_event(), later)
    assert [f["splitEvent"]["fragment"] for f in fragments] == [1, 2, 3]


def test_only_the_first_event_is_checked() -> None:
    stage = SplitLargeEventStage(dataclasses.replace(TOKEN_DATA, fragment_num=2), max_size=LIMIT)
    assert len(stage.process(update_event(), TOKEN_DATA)) == 1
    assert len(stage.process(update_event(), TOKEN_DATA)) == 3  # the same event again: all of it


def test_swallowing_applies_to_the_resumed_event_only() -> None:
    fragments = split_large_event(update_event(), TOKEN_DATA, max_size=LIMIT)
    plain = SplitLargeEventStage(max_size=LIMIT, swallow_resume_point=True)
    assert plain.process(update_event(), TOKEN_DATA) == fragments
    resumed = SplitLargeEventStage(
        fragment_token(fragments[1]), max_size=LIMIT, swallow_resume_point=True
    )
    assert resumed.process(update_event(), TOKEN_DATA) == fragments[2:]
    assert resumed.process(update_event(), TOKEN_DATA) == fragments


def test_event_before_the_resume_point_is_an_internal_error() -> None:
    client = dataclasses.replace(TOKEN_DATA, txn_op_index=3, fragment_num=0)
    with pytest.raises(TransformError, match="before resume point") as info:
        SplitLargeEventStage(client, max_size=LIMIT).process(update_event(), TOKEN_DATA)
    assert info.value.code == 7182805


def test_stage_needs_a_fragment_token() -> None:  # tassert 7182801
    with pytest.raises(ConfigurationError, match="fragmentNum"):
        SplitLargeEventStage(TOKEN_DATA)


def _with(**changes: Any) -> ResumeTokenData:
    return dataclasses.replace(TOKEN_DATA, **changes)


@pytest.mark.parametrize(
    ("event", "client", "expected"),
    [
        (TOKEN_DATA, _with(fragment_num=1), ResumeStatus.NEEDS_SPLIT),
        (_with(fragment_num=1), _with(fragment_num=1), ResumeStatus.FOUND),
        (_with(fragment_num=2), _with(fragment_num=1), ResumeStatus.SURPASSED),
        (_with(fragment_num=0), _with(fragment_num=1), ResumeStatus.CHECK_NEXT),
        (_with(cluster_time=Timestamp(1700000001, 0)), _with(), ResumeStatus.SURPASSED),
        (TOKEN_DATA, high_water_mark(TIME), ResumeStatus.SURPASSED),
        (_with(txn_op_index=1), _with(txn_op_index=2), ResumeStatus.CHECK_NEXT),
        (_with(txn_op_index=3), _with(txn_op_index=2), ResumeStatus.SURPASSED),
        (_with(from_invalidate=True), TOKEN_DATA, ResumeStatus.SURPASSED),
        (_with(uuid=None), TOKEN_DATA, ResumeStatus.CHECK_NEXT),
        (
            _with(event_identifier={"operationType": "update", "documentKey": {"_id": 2}}),
            _with(fragment_num=0),
            ResumeStatus.SURPASSED,
        ),
        (  # numbers compare by value, as the ValueComparator does
            _with(event_identifier={"operationType": "update", "documentKey": {"_id": Int64(1)}}),
            _with(fragment_num=0),
            ResumeStatus.NEEDS_SPLIT,
        ),
    ],
)
def test_compare_with_resume_token(
    event: ResumeTokenData, client: ResumeTokenData, expected: ResumeStatus
) -> None:
    assert compare_with_resume_token(event, client) is expected
