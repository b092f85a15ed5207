"""The compiled reader of an event's row fields against the Python reader, its reference.

``event_fields`` (``transform/raw/_event_fields.c``) must return exactly what
``python_event_fields`` reads from a ``RawBSONDocument``, or None (the Python reader then
takes the event); generated events put every BSON type in every field it reads.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import bson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.spark.source.encoded_rows import DOCUMENT_COLUMNS, python_event_fields
from tests.transform.test_raw_extended_json import (
    LEAVES,
    VALUES,
    Element,
    _binary,
    _document,
    _string,
)

compiled = pytest.importorskip("shardstream.transform.raw._ejson")

STRINGS = st.text(max_size=12).map(lambda text: (0x02, _string(text)))
SUBDOCUMENTS = st.dictionaries(st.sampled_from(["_id", "a", "b.c", "é"]), VALUES, max_size=4).map(
    lambda d: (0x03, _document(list(d.items())))
)
DATES = st.integers(-(2**63), 2**63 - 1).map(lambda ms: (0x09, struct.pack("<q", ms)))
NEAR_DATE_LIMITS = st.sampled_from(
    [-62135596800001, -62135596800000, 0, 253402300799999, 253402300800000]
).map(lambda ms: (0x09, struct.pack("<q", ms)))
UUIDS = st.one_of(
    st.binary(min_size=16, max_size=16).map(lambda data: _binary(4, data)),
    st.builds(_binary, st.sampled_from([3, 4]), st.binary(max_size=20)),
)
INTEGERS = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(lambda n: (0x10, struct.pack("<i", n))),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: (0x12, struct.pack("<q", n))),
)


def _field(usual: st.SearchStrategy[Element]) -> st.SearchStrategy[Element]:
    """A field's usual type most of the time, any value (null included) sometimes."""
    return st.one_of(usual, usual, usual, st.just((0x0A, b"")), LEAVES)


def _namespace() -> st.SearchStrategy[Element]:
    parts = st.fixed_dictionaries({}, optional={"db": _field(STRINGS), "coll": _field(STRINGS)})
    return parts.map(lambda d: (0x03, _document(list(d.items()))))


FIELDS: dict[str, st.SearchStrategy[Element]] = {
    "operationType": _field(STRINGS),
    "clusterTime": _field(st.integers(0, 2**64 - 1).map(lambda t: (0x11, struct.pack("<Q", t)))),
    "wallTime": _field(st.one_of(DATES, NEAR_DATE_LIMITS)),
    "ns": _field(_namespace()),
    "collectionUUID": _field(UUIDS),
    "txnNumber": _field(INTEGERS),
    **{name: _field(SUBDOCUMENTS) for name in (*DOCUMENT_COLUMNS, "lsid")},
}

EVENTS = st.builds(
    lambda fields, extra, order: _document(
        sorted(
            [*fields.items(), *extra],
            key=lambda pair: order.index(pair[0]) if pair[0] in order else -1,
        )
    ),
    st.fixed_dictionaries({}, optional=FIELDS),
    # unknown fields, and known names repeated (a decoded dict keeps the last)
    st.lists(st.tuples(st.sampled_from(["_id", "x", "wallTime", "lsid"]), VALUES), max_size=2),
    st.permutations(list(FIELDS)),
)


def _python(raw: bytes, relaxed: bool) -> tuple[Any, ...] | Exception:
    try:
        return python_event_fields(raw, relaxed=relaxed)
    except Exception as exc:  # e.g. int() of an infinite txnNumber: the C reader must decline
        return exc


@pytest.mark.parametrize("relaxed", [False, True], ids=["canonical", "relaxed"])
@settings(max_examples=300)
@given(raw=EVENTS)
def test_compiled_fields_are_the_python_readers_or_none(relaxed: bool, raw: bytes) -> None:
    fast = compiled.event_fields(raw, relaxed)
    expected = _python(raw, relaxed)
    if fast is not None:
        assert fast == expected
    # None: the Python reader takes the event (and raises what it raises)


def test_a_usual_event_is_read_in_c() -> None:
    # The fast path must take ordinary events, or the speed it exists for is gone.
    event = {
        "_id": {"_data": "82"},
        "operationType": "update",
        "clusterTime": bson.Timestamp(1_700_000_000, 3),
        "wallTime": bson.datetime.datetime(2024, 5, 6, 7, 8, 9, 123000),
        "ns": {"db": "shop", "coll": "orders"},
        "collectionUUID": bson.Binary(uuid.UUID(int=7).bytes, 4),
        "documentKey": {"_id": bson.ObjectId(b"abcdefghijkl")},
        "updateDescription": {"updatedFields": {"n": 2}, "removedFields": []},
        "txnNumber": bson.Int64(9),
        "lsid": {"id": bson.Binary(uuid.UUID(int=1).bytes, 4), "uid": b"\x01" * 32},
    }
    raw = bson.encode(event)
    fast = compiled.event_fields(raw, False)
    assert fast is not None
    assert fast == python_event_fields(raw, relaxed=False)
    assert fast[:7] == (
        "update",
        1_700_000_000,
        3,
        1714979289123,
        "shop",
        "orders",
        "00000000-0000-0000-0000-000000000007",
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x05\x00\x00",
        b"\x06\x00\x00\x00\x00\x00",
        b"\x0c\x00\x00\x00\x02a\x00\xff\xff\xff",
        bson.encode({"operationType": "insert"}) + b"\x00",
    ],
    ids=["empty", "short", "bad-terminator", "string-overruns", "trailing-bytes"],
)
def test_malformed_bytes_are_left_to_the_python_reader(raw: bytes) -> None:
    assert compiled.event_fields(raw, False) is None
    with pytest.raises((bson.errors.InvalidBSON, ValueError)):
        python_event_fields(raw, relaxed=False)
