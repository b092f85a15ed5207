"""Conformance: every case of tests/data/transform_cases.json, on both paths.

The reference path through the public API (``transform_oplog``), the fast path
through ``FastShardPipeline`` (the ``path`` fixture, tests/paths.py).

Each case's events must match ``expected`` field for field, in order, with the same
BSON types; ``_id`` must sit at ``expected_id_index``; the tokens must decode to the
event's clusterTime, uuid, txnOpIndex and identifier.  Held-out server cases exist:
these tests check the rules through the cases we have.
"""

from __future__ import annotations

from typing import Any

import pytest
from bson import json_util

from shardstream.errors import TransformError
from shardstream.resume_token import ResumeToken, decode_token, encode_token
from shardstream.resume_token.token_json import token_data_from_document
from shardstream.transform import ChangeEvent, event_to_json
from tests.paths import OnPath
from tests.transform.vector_cases import (
    PAIR_CASES,
    RAW_CASES,
    SKIPPED,
    TOKEN_ERRATA,
    oplog_entries,
    options_for,
    pairs,
)

CASES = list(zip(RAW_CASES, PAIR_CASES, strict=True))
STREAM_CASES = [c for c in CASES if c[0]["options"].get("kind") != "resumeTokenEncoding"]
TOKEN_CASES = [c for c in CASES if c[0]["options"].get("kind") == "resumeTokenEncoding"]


def _ids(cases: list[tuple[dict[str, Any], Any]]) -> list[str]:
    return [case["name"] for case, _ in cases]


def _run(path: OnPath, case: dict[str, Any]) -> list[ChangeEvent]:
    if case["name"] in SKIPPED:
        pytest.skip(SKIPPED[case["name"]])
    return path.transform(oplog_entries(case), options_for(case))


def _expected_field(pair_case: Any, key: str) -> Any:
    return next(value for name, value in pair_case if name == key)


@pytest.mark.parametrize(("case", "pair_case"), STREAM_CASES, ids=_ids(STREAM_CASES))
def test_events_match_expected_fields_order_and_types(
    path: OnPath, case: dict[str, Any], pair_case: Any
) -> None:
    if "expected_error" in case:
        with pytest.raises(TransformError) as caught:
            _run(path, case)
        assert caught.value.code == case["expected_error"]
        assert caught.value.ts is not None
        return
    events = _run(path, case)
    expected = _expected_field(pair_case, "expected")
    id_positions = case["expected_id_index"]
    assert len(events) == len(expected), [e.document for e in events]
    for event, want, id_position in zip(events, expected, id_positions, strict=True):
        got = pairs(event_to_json(event.document))
        assert [name for name, _ in got].index("_id") == id_position
        assert [pair for pair in got if pair[0] != "_id"] == want


@pytest.mark.parametrize(("case", "pair_case"), STREAM_CASES, ids=_ids(STREAM_CASES))
def test_tokens_decode_to_the_event(path: OnPath, case: dict[str, Any], pair_case: Any) -> None:
    if "expected_error" in case:
        pytest.skip("the stream fails; no events")
    events = _run(path, case)
    txn_indexes = case.get("expected_txnOpIndex")
    for number, event in enumerate(events):
        document = event.document
        token = ResumeToken.from_document(document["_id"])
        data = decode_token(token)
        assert data == event.token_data
        assert data.cluster_time == document["clusterTime"]
        if txn_indexes is not None:
            assert data.txn_op_index == txn_indexes[number]
        assert data.from_invalidate == (document["operationType"] == "invalidate")
        if "collectionUUID" in document:
            assert data.uuid is not None
            assert data.uuid.bytes == bytes(document["collectionUUID"])
        slot = data.event_slot
        if data.version >= 2 and document["operationType"] != "invalidate":
            assert slot["operationType"] == document["operationType"]
            if "documentKey" in document:
                assert slot["documentKey"] == document["documentKey"]
        elif "documentKey" in document:
            assert slot == document["documentKey"]


@pytest.mark.parametrize(("case", "pair_case"), TOKEN_CASES, ids=_ids(TOKEN_CASES))
def test_literal_tokens_of_the_server_tests(case: dict[str, Any], pair_case: Any) -> None:
    document = json_util.loads(
        json_util.dumps(case["tokenData"]), json_options=json_util.CANONICAL_JSON_OPTIONS
    )
    if case["name"] in TOKEN_ERRATA:
        document.update(TOKEN_ERRATA[case["name"]][1])
    data = token_data_from_document(document)
    expected = case["expected"][0]["_data"]
    assert encode_token(data).data == expected
    assert decode_token(expected) == data
