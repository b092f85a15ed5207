"""Record batches built column by column in C against the rows the Python reader builds.

``events_to_batch`` reads fast-path events with the compiled ``event_columns`` and leaves
the rest to ``event_values``, the reference; whatever mix of events a batch holds, it must be
the batch of the reference's rows, in the events' order, or fail as the reference fails.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any

import bson
import pytest
from bson.decimal128 import Decimal128
from bson.timestamp import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.raw.shard_reader import EncodedRun
from shardstream.resume_token import ResumeToken, encode_token, high_water_mark
from shardstream.spark.source import partitions
from shardstream.spark.source.encoded_rows import DOCUMENT_COLUMNS
from shardstream.spark.source.event_batches import events_to_batch
from shardstream.spark.source.rows import EVENT_SCHEMA, event_values, rows_to_batch
from shardstream.transform import ChangeEvent
from shardstream.transform.raw.event_writer import encode_event_document
from tests.spark.test_event_fields import (
    DATES,
    FIELDS,
    INTEGERS,
    NEAR_DATE_LIMITS,
    STRINGS,
    UUIDS,
)
from tests.spark.test_rows import _events
from tests.transform.test_raw_extended_json import VALUES, Element, _binary, _document, _string

compiled = pytest.importorskip("shardstream.transform.raw._ejson")

# Real tokens' _data: an event left to Python may take its clusterTime from its token.
KEYS = [
    encode_token(high_water_mark(Timestamp(time, inc))).data
    for time, inc in ((1, 0), (1_700_000_000, 7), (2**32 - 1, 2**32 - 1))
]

# _typeBits the high-water-mark tokens decode with: none, one byte, the sized form.
TYPE_BITS = st.sampled_from([None, b"\x00", b"\x8a" + bytes(10)])

NULL: Element = (0x0A, b"")
# Plain documents (no Decimal128, no DBRef: the Python writer's cases), encoded by pymongo.
TEXT = st.characters(blacklist_categories=["Cs"])  # UTF-8 can hold it
KEY_NAMES = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00$"), max_size=6
)
PLAIN_VALUES = st.recursive(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.floats(),
        st.text(TEXT, max_size=8),
        st.booleans(),
        st.none(),
        st.binary(max_size=8),
        st.datetimes(timezones=st.just(datetime.UTC)),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY_NAMES, inner, max_size=3),
    max_leaves=8,
)
PLAIN_DOCUMENTS = st.dictionaries(KEY_NAMES, PLAIN_VALUES, max_size=5).map(
    lambda d: (0x03, bson.encode(d))
)
TIMESTAMPS = st.integers(0, 2**64 - 1).map(lambda t: (0x11, struct.pack("<Q", t)))
# Each field of its usual type or null, clusterTime a Timestamp: events the compiled reader
# takes whole (most of them).
USUAL: dict[str, st.SearchStrategy[Element]] = {
    name: st.one_of(usual, st.just(NULL))
    for name, usual in {
        "operationType": STRINGS,
        "wallTime": st.one_of(DATES, NEAR_DATE_LIMITS),
        "ns": st.fixed_dictionaries({}, optional={"db": STRINGS, "coll": STRINGS}).map(
            lambda d: (0x03, _document(list(d.items())))
        ),
        "collectionUUID": UUIDS,
        "txnNumber": INTEGERS,
        **dict.fromkeys((*DOCUMENT_COLUMNS, "lsid"), PLAIN_DOCUMENTS),
    }.items()
}


@st.composite
def _encoded_events(draw: st.DrawFn) -> EncodedEvent:
    """An event as the fast path holds it: half the time with each field of its usual type
    (the compiled reader's case), else any BSON type in the fields the row reads, names
    repeated, its _id sometimes not the token's document at all."""
    key = draw(st.sampled_from(KEYS))
    bits = draw(TYPE_BITS)
    id_fields: list[tuple[str, Element]] = [("_data", (0x02, _string(key)))]
    if bits is not None:
        id_fields.append(("_typeBits", _binary(0, bits)))
    usual = draw(st.booleans())
    good_id = st.just((0x03, _document(id_fields)))
    identifier: Element = draw(good_id if usual else st.one_of(good_id, VALUES))
    required = {"clusterTime": TIMESTAMPS} if usual else {}
    fields = draw(st.fixed_dictionaries(required, optional=USUAL if usual else FIELDS))
    names = st.sampled_from(["x", "lsid", "wallTime"])
    extra = [] if usual else draw(st.lists(st.tuples(names, VALUES), max_size=2))
    raw = _document([("_id", identifier), *fields.items(), *extra])
    event = EncodedEvent(raw, key.encode(), draw(st.sampled_from(["s0", "s1"])))
    event.token = ResumeToken(key, bits)  # as the raw says (the fast path never writes bits)
    return event


def _reference(events: list[ChangeEvent], relaxed: bool) -> Any:
    try:
        return rows_to_batch([event_values(event, relaxed=relaxed) for event in events])
    except Exception as exc:  # the reference's verdict on a row it cannot read
        return exc


@pytest.mark.parametrize("relaxed", [False, True], ids=["canonical", "relaxed"])
@settings(max_examples=100, deadline=None)
@given(events=st.lists(_encoded_events(), min_size=1, max_size=8))
def test_any_events_make_the_reference_batch_or_its_error(
    events: list[ChangeEvent], relaxed: bool
) -> None:
    expected = _reference(events, relaxed)
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            events_to_batch(events, relaxed=relaxed)
        return
    batch = events_to_batch(events, relaxed=relaxed)
    assert batch.schema == EVENT_SCHEMA
    assert batch.equals(expected), (batch.to_pylist(), expected.to_pylist())


def _encoded(event: ChangeEvent) -> EncodedEvent:
    encoded = EncodedEvent(
        encode_event_document(event.document), event.token.data.encode(), event.shard or ""
    )
    encoded.token = event.token
    encoded.raw_update = (
        None
        if event.raw_update is None
        else bson.decode(bson.encode(event.raw_update), codec_options=_RAW)
    )
    return encoded


_RAW = bson.CodecOptions(document_class=bson.raw_bson.RawBSONDocument)


@pytest.mark.parametrize("relaxed", [False, True], ids=["canonical", "relaxed"])
def test_dict_and_encoded_events_mixed_keep_their_order(relaxed: bool) -> None:
    # Every other event as the fast path holds it, the rest as dicts: one batch, rows in
    # the events' order, each as the reference reads it.
    events = _events()
    mixed = [_encoded(event) if index % 2 else event for index, event in enumerate(events)]
    batch = events_to_batch(mixed, relaxed=relaxed)
    assert batch.equals(rows_to_batch([event_values(e, relaxed=relaxed) for e in mixed]))
    assert batch.column("_id").to_pylist() == [event.token.data for event in events]
    # and the dicts' rows are the encoded events' rows
    assert batch.equals(events_to_batch([_encoded(event) for event in events], relaxed=relaxed))


def test_usual_events_are_read_in_c_and_the_rest_left_in_place() -> None:
    simulated = _events()
    events = [_encoded(event) for event in simulated]
    raws: list[bytes | None] = [event.raw for event in events]
    _, left = compiled.event_columns(raws, False)
    assert left == []  # the speed the compiled reader exists for
    # A Decimal128 in a document is the Python writer's: that event alone is left, in place.
    decimal = dict(simulated[3].document, fullDocument={"_id": 1, "price": Decimal128("1.10")})
    events[3] = _encoded(dataclasses.replace(simulated[3], document=decimal))
    raws[3], raws[5] = events[3].raw, None
    _, left = compiled.event_columns(raws, False)
    assert left == [3, 5]
    batch = events_to_batch(events)
    assert batch.equals(rows_to_batch([event_values(event) for event in events]))
    assert '"$numberDecimal": "1.10"' in batch.column("fullDocument")[3].as_py()


def test_no_events_make_an_empty_batch() -> None:
    batch = events_to_batch([])
    assert batch.num_rows == 0
    assert batch.schema == EVENT_SCHEMA


def test_a_wall_time_past_datetimes_range_is_null_in_both_readers() -> None:
    # Years past 9999 (the token keeps them exactly) are no datetime: the column is null.
    event = _encoded(_events()[0])
    raw = bytearray(event.raw)
    at = raw.find(b"\x09wallTime\x00") + len(b"\x09wallTime\x00")
    raw[at : at + 8] = struct.pack("<q", 253402300800000)
    late = EncodedEvent(bytes(raw), event.token.data.encode(), event.shard or "")
    batch = events_to_batch([late, event])
    assert batch.column("wallTime").to_pylist()[0] is None
    assert batch.equals(rows_to_batch([event_values(late), event_values(event)]))


def _run(events: list[EncodedEvent]) -> EncodedRun:
    """``events`` (one shard's, fast-path) as the run a shard reader gives for them."""
    updates = [
        (index, bytes(event.raw_update.raw))
        for index, event in enumerate(events)
        if isinstance(event.raw_update, bson.raw_bson.RawBSONDocument)
    ]
    keys = [event.token.data.encode() for event in events]
    return EncodedRun("s0", keys, [event.raw for event in events], updates)


@pytest.mark.parametrize(
    ("rows", "size"), [(3, 1 << 30), (10_000, 1_500), (4, 900), (10_000, 1 << 30)]
)
def test_runs_make_the_batches_their_events_make(
    rows: int, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window's runs, with a dict event between them and an event the compiled reader
    # leaves to Python inside one, cut by rows and by bytes: the same batches, at the same
    # places, as the runs' events added one by one.
    simulated = _events()
    for event in simulated:
        event.shard = "s0"
    encoded = [_encoded(event) for event in simulated]
    decimal = dict(simulated[3].document, fullDocument={"_id": 1, "price": Decimal128("1.10")})
    encoded[3] = _encoded(dataclasses.replace(simulated[3], document=decimal))
    first, second = _run(encoded[:5]), _run(encoded[6:])
    items: list[ChangeEvent | EncodedRun] = [first, simulated[5], second]
    one_by_one = [*first.events(), simulated[5], *second.events()]
    monkeypatch.setattr(partitions, "ROWS_PER_ARROW_BATCH", rows)
    monkeypatch.setattr(partitions, "BYTES_PER_ARROW_BATCH", size)
    batches = list(partitions.arrow_batches(items, relaxed=False))
    expected = list(partitions.arrow_batches(one_by_one, relaxed=False))
    assert [batch.num_rows for batch in batches] == [batch.num_rows for batch in expected]
    assert all(got.equals(want) for got, want in zip(batches, expected, strict=True))
    assert sum(batch.num_rows for batch in batches) == len(simulated)
    assert len(batches) > 1 or (rows == 10_000 and size == 1 << 30)
    # The update events carry their entry's o, which the run hands over by index.
    assert any(batch.column("_oplogUpdate").null_count < batch.num_rows for batch in batches)


def test_a_run_slice_keeps_its_updates_at_their_events() -> None:
    encoded = [_encoded(event) for event in _events()]
    run = _run(encoded)
    assert run.updates  # the simulated events hold updates
    part = run.slice(2, 7)
    assert [e.raw for e in part.events()] == [e.raw for e in encoded[2:7]]
    assert [e.raw_update for e in part.events()] == [e.raw_update for e in encoded[2:7]]
    assert part.last_token() == ResumeToken(encoded[6].token.data)
