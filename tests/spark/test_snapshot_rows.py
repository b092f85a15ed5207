"""Snapshot rows: each document's key and text taken from its bytes."""

from __future__ import annotations

from typing import Any

import bson
import pytest
from bson.datetime_ms import DatetimeMS
from bson.int64 import Int64
from bson.regex import Regex
from bson.son import SON
from bson.timestamp import Timestamp

from shardstream.errors import SinkError
from shardstream.spark.delta.snapshot.marks import SNAPSHOT_OPERATION
from shardstream.spark.delta.snapshot.tables import read_rows
from shardstream.transform.extended_json import event_to_json

START = Timestamp(1700000000, 5)


def _raw(document: SON[str, Any]) -> bytes:
    # As a field's value, a document keeps its order (pymongo moves a top-level _id first).
    wrapped = bson.encode({"d": document})
    return wrapped[len(b"\x00\x00\x00\x00\x03d\x00") : -1]


def _rows(*documents: SON[str, Any]) -> list[dict[str, Any]]:
    raw = [_raw(document) for document in documents]
    return read_rows(raw, "shop", "orders", token="82AB", start=START).to_pylist()


@pytest.mark.parametrize(
    "document",
    [
        SON([("_id", Int64(7)), ("a", 1)]),  # where mongod stores it: first
        SON([("a", 1), ("_id", {"k": [1, 2]})]),  # later in the document
        SON(
            [("_id", Regex("^a", "i")), ("at", DatetimeMS(2**62))]
        ),  # a type sized only by decoding
    ],
    ids=["first", "later", "regex-beside-a-far-date"],
)
def test_the_document_key_is_the_documents_id_as_canonical_json(document: SON[str, Any]) -> None:
    (row,) = _rows(document)
    assert row["documentKey"] == event_to_json({"_id": document["_id"]})
    assert row["fullDocument"] == event_to_json(document)
    assert (row["_id"], row["operationType"], row["db"], row["coll"]) == (
        "82AB",
        SNAPSHOT_OPERATION,
        "shop",
        "orders",
    )
    assert row["clusterTime"] == {"t": START.time, "i": START.inc}


def test_a_document_without_an_id_is_refused_naming_its_collection() -> None:
    with pytest.raises(SinkError, match=r"shop\.orders to have an _id"):
        _rows(SON([("a", 1)]))
