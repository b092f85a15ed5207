"""The compiled reading of a sampled entry's ``ts`` (``_framing.sample_ts``) against the
Python reading it stands in for (``ts_index._ts_of``, pymongo's RawBSONDocument): it
vouches only for what that reading gives without an error, and gives the same value."""

from __future__ import annotations

import datetime
import random
import uuid
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.errors import BSONError
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog import ts_index
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS

sample_ts = pytest.importorskip("shardstream.oplog._framing").sample_ts


def _entry(**extra: Any) -> dict[str, Any]:
    """An update entry as a 7.0 primary writes it, then ``extra``'s fields."""
    return {
        "op": "u",
        "ns": "shop.orders",
        "ui": Binary(uuid.UUID(int=7).bytes, 4),
        "o": {"$v": 2, "diff": {"u": {"qty": 5}}},
        "o2": {"_id": ObjectId("65a1b2c3d4e5f60718293a4b")},
        "ts": Timestamp(1_700_000_000, 3),
        "t": Int64(12),
        "v": Int64(2),
        "wall": datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC),
        **extra,
    }


VOUCHED = [
    _entry(),
    _entry(fromMigrate=True, prevOpTime={"ts": Timestamp(1, 1), "t": Int64(1)}),
    _entry(stmtId=0, txnNumber=Int64(4), lsid={"id": Binary(b"x" * 16, 4)}),
    _entry(d=1.5, n=None, lo=MinKey(), hi=MaxKey(), dec=Decimal128("1.10")),
    _entry(bin=Binary(b"", 0), far=bson.DatetimeMS(2**62)),
    {"ts": Timestamp(0, 0), "op": "n", "ns": "", "o": {}},
    {"ts": Timestamp(2**32 - 1, 2**32 - 1), "op": "n"},
]
LEFT_TO_PYTHON = [
    _entry(ns="café.orders"),  # not ASCII: pymongo's strict UTF-8 decides
    {**_entry(), "é": 1},
    _entry(arr=[1, 2]),  # arrays are decoded whole: not walked here
    _entry(re=Regex("a", "i")),
    _entry(old=Binary(b"abc", 2)),  # subtype 2's inner length
    {k: v for k, v in _entry().items() if k != "ts"},  # no ts: Python says so
    _entry(ts=Int64(5)),  # a ts that is not a Timestamp
]


def _python(document: bytes) -> int | None:
    """pymongo's reading of the top-level ``ts`` (None: an error, or not a Timestamp)."""
    try:
        ts = RawBSONDocument(document, RAW_OPLOG_CODEC_OPTIONS).get("ts")
    except (BSONError, ValueError, OverflowError):
        return None
    return (ts.time << 32) | ts.inc if isinstance(ts, Timestamp) else None


@pytest.mark.parametrize("entry", VOUCHED, ids=range(len(VOUCHED)))
def test_common_entries_are_read_in_c_as_pymongo_reads_them(entry: dict[str, Any]) -> None:
    document = bson.encode(entry)
    padded = b"\x07" * 9 + document + b"\x01" * 5  # read in place, at an offset
    found = sample_ts(padded, 9, len(document))
    assert found is not None
    assert found == _python(document) == (entry["ts"].time << 32) | entry["ts"].inc


@pytest.mark.parametrize("entry", LEFT_TO_PYTHON, ids=range(len(LEFT_TO_PYTHON)))
def test_what_it_cannot_vouch_for_is_left_to_python(entry: dict[str, Any]) -> None:
    assert sample_ts(bson.encode(entry), 0, len(bson.encode(entry))) is None


def test_a_ts_past_the_clocks_range_is_read_and_left_to_the_index_to_refuse() -> None:
    # The index's C run stops at such a sample and its Python loop reports the clock's
    # error there (tests/oplog/test_ts_index.py, "past the clock").
    document = bson.encode({"op": "n", "ts": Timestamp(2**32 - 1, 1)})
    assert sample_ts(document, 0, len(document)) == ((2**32 - 1) << 32) | 1
    with pytest.raises(OplogError, match="clock"):
        ts_index._ts_of(document, "f.bson", 0)


def test_a_size_other_than_the_documents_own_is_not_vouched_for() -> None:
    document = bson.encode(_entry())
    assert sample_ts(document + b"\x00", 0, len(document) + 1) is None
    assert sample_ts(document, 0, len(document) - 1) is None
    assert sample_ts(document, 1, len(document)) is None  # runs past the buffer
    assert sample_ts(document, -1, len(document)) is None


@pytest.mark.parametrize("seed", range(6))
def test_damaged_entries_are_vouched_for_only_where_python_reads_the_same(seed: int) -> None:
    rng = random.Random(seed)
    vouched = 0
    for _ in range(3_000):
        document = bytearray(bson.encode(rng.choice(VOUCHED)))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(4, len(document))  # the length prefix stays the size
            document[at] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        found = sample_ts(bytes(document), 0, len(document))
        if found is not None:
            vouched += 1
            assert found == _python(bytes(document)), bytes(document).hex()
    assert vouched > 100  # single-byte damage to a value still reads
