"""The row schema: every column from a real merged stream, documents round-trip as EJSON."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util

from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token import ResumeToken
from shardstream.sim import SimulatedCluster, SimulationConfig, simulated_sources
from shardstream.spark.source.event_batches import events_to_batch
from shardstream.spark.source.rows import (
    EVENT_SCHEMA,
    PUBLIC_COLUMNS,
    SPARK_DDL,
    event_to_row,
)
from shardstream.transform import ChangeEvent, ChangeStreamOptions

pa = pytest.importorskip("pyarrow")


def _events() -> list[ChangeEvent]:
    result = SimulatedCluster(SimulationConfig(seed=3, shards=2, operations=150)).run()
    stream = MergedStream(simulated_sources(result, seed=3), ChangeStreamOptions())
    events: list[ChangeEvent] = []
    while batch := stream.next_batch(100)[0]:
        events += batch
    return events


def test_rows_carry_every_event_field_as_the_stream_has_it() -> None:
    events = _events()
    rows = [event_to_row(event) for event in events]
    assert [row["_id"] for row in rows] == sorted(row["_id"] for row in rows)
    for event, row in zip(events, rows, strict=True):
        doc = event.document
        assert row["_id"] == doc["_id"]["_data"]
        assert row["operationType"] == doc["operationType"]
        assert (row["clusterTime"]["t"], row["clusterTime"]["i"]) == (
            doc["clusterTime"].time,
            doc["clusterTime"].inc,
        )
        assert row["shard"] == event.shard
        for name in ("documentKey", "fullDocument", "updateDescription"):
            if name in doc:
                back = json_util.loads(row[name], json_options=json_util.CANONICAL_JSON_OPTIONS)
                assert back == doc[name]
            else:
                assert row[name] is None
        if doc["operationType"] == "update":
            assert row["_oplogUpdate"] is not None
            assert bson.decode(row["_oplogUpdate"]) == event.raw_update
        if "wallTime" in doc:
            assert row["wallTime"].tzinfo is datetime.UTC


def test_batch_has_the_arrow_schema_and_ddl_names_every_column() -> None:
    batch = events_to_batch(_events())
    assert batch.schema == EVENT_SCHEMA
    assert batch.num_rows > 0
    for name in EVENT_SCHEMA.names:
        assert f"`{name}`" in SPARK_DDL
    assert "_oplogUpdate" not in PUBLIC_COLUMNS


def test_relaxed_json_on_request() -> None:
    event = next(e for e in _events() if e.operation_type == "insert")
    canonical = event_to_row(event)["fullDocument"]
    relaxed = event_to_row(event, relaxed=True)["fullDocument"]
    assert json_util.loads(canonical) == json_util.loads(relaxed)
    assert "$numberInt" in canonical
    assert "$numberInt" not in relaxed


def test_type_bits_ride_beside_the_token_so_a_native_stream_can_resume() -> None:
    with_bits = [e for e in _events() if e.token.type_bits is not None]
    assert with_bits, "the simulator writes Int64 and double keys: some tokens have type bits"
    for event in with_bits:
        row = event_to_row(event)
        assert row["_idTypeBits"] is not None
        rebuilt = ResumeToken(row["_id"], bytes.fromhex(row["_idTypeBits"]))
        assert rebuilt.to_document() == event.document["_id"]
    plain = next(e for e in _events() if e.token.type_bits is None)
    assert event_to_row(plain)["_idTypeBits"] is None


def _vector_events() -> list[ChangeEvent]:
    from shardstream.transform import transform_oplog
    from tests.transform.vector_cases import RAW_CASES, SKIPPED, oplog_entries, options_for

    events: list[ChangeEvent] = []
    for case in RAW_CASES:
        # token-encoding cases hold no stream; refused and unemulated cases hold no rows
        if "expected_error" in case or case["name"] in SKIPPED or "scope" not in case["options"]:
            continue
        events += transform_oplog(oplog_entries(case), options_for(case))
    return events


@pytest.mark.parametrize("relaxed", [False, True], ids=["canonical", "relaxed"])
def test_json_columns_are_the_reference_writers_text(relaxed: bool) -> None:
    # Every conformance vector's events (every BSON type they hold) and the simulator's.
    from shardstream.spark.source.encoded_rows import DOCUMENT_COLUMNS
    from shardstream.spark.source.rows import RELAXED
    from shardstream.transform import event_to_json
    from shardstream.transform.field_list import FieldList

    events = _vector_events() + _events()
    checked = 0
    for event in events:
        row = event_to_row(event, relaxed=relaxed)
        for name in DOCUMENT_COLUMNS:
            value = event.document.get(name)
            if value is None:
                assert row[name] is None
                continue
            repeated = isinstance(value, dict) and any(
                isinstance(part, FieldList) for part in value.values()
            )
            if relaxed and repeated:
                continue  # json_util cannot write repeated names; canonical checks them
            expected = (
                json_util.dumps(value, json_options=RELAXED) if relaxed else event_to_json(value)
            )
            assert row[name] == expected, (name, event.document.get("_id"))
            checked += 1
    assert checked > 500


def _merged(sources: dict[str, Any]) -> list[ChangeEvent]:
    stream = MergedStream(sources, ChangeStreamOptions())
    events: list[ChangeEvent] = []
    while not stream.exhausted:
        events += stream.next_batch(100)[0]
    return events


@pytest.mark.parametrize("relaxed", [False, True], ids=["canonical", "relaxed"])
@pytest.mark.parametrize("corpus", ["objectid", "layouts"])
def test_rows_of_encoded_events_are_the_decoded_events_rows(
    corpus: str, relaxed: bool, tmp_path: Path
) -> None:
    # The fast path's events become rows from their bytes (encoded_rows); the reference
    # path's events from their dicts: one input, the same rows, column by column.
    from shardstream.bench.corpus import oplog_bytes
    from shardstream.merger.raw.encoded_event import EncodedEvent
    from tests.paths import RoundTrip
    from tests.transform.raw_corpus import generate_entries

    def sources(raw: bool) -> dict[str, Any]:
        found = {}
        for seed in range(3):
            path = tmp_path / f"s{seed}.bson"
            if not path.exists():
                path.write_bytes(
                    oplog_bytes(400, seed=seed)
                    if corpus == "objectid"
                    else b"".join(bson.encode(e) for e in generate_entries(400, seed=seed))
                )
            found[path.stem] = RoundTrip(FileOplogSource(path.stem, str(path)), raw=raw)
        return found

    fast, reference = _merged(sources(True)), _merged(sources(False))
    assert sum(isinstance(event, EncodedEvent) for event in fast) > 300
    assert any(event.operation_type == "update" for event in fast)
    fast_rows = [event_to_row(event, relaxed=relaxed) for event in fast]
    assert fast_rows == [event_to_row(event, relaxed=relaxed) for event in reference]
    batch = events_to_batch(fast, relaxed=relaxed)
    assert batch.to_pylist() == events_to_batch(reference, relaxed=relaxed).to_pylist()
