"""The raw-BSON Extended JSON writer gives json_util's text for the decoded document, exactly.

Documents are generated as bytes, element by element, so that every BSON type is covered,
the ones pymongo cannot encode too (Symbol, Undefined, DBPointer, code with scope, binary
subtype 2, regex flags it does not know); the oracle decodes them as the oplog readers do and
writes them with ``bson.json_util.dumps``, canonical and relaxed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import bson
import pytest
from bson import json_util
from bson.codec_options import DatetimeConversion
from bson.decimal128 import Decimal128
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.errors import OplogError
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.transform.raw import extended_json
from shardstream.transform.raw.extended_json import bson_to_json, walk_bson_to_json
from tests.strategies import DECIMALS, NAMES, TEXT

CANONICAL = json_util.CANONICAL_JSON_OPTIONS.with_options(
    datetime_conversion=DatetimeConversion.DATETIME_AUTO
)
RELAXED = json_util.RELAXED_JSON_OPTIONS.with_options(
    datetime_conversion=DatetimeConversion.DATETIME_AUTO
)
Element = tuple[int, bytes]  # type byte, payload
Writer = Callable[..., str]
# The public writer (compiled, falling back to the walker) and the walker alone.
WRITERS = pytest.mark.parametrize("write", [bson_to_json, walk_bson_to_json], ids=["c", "walker"])


def _string(text: str) -> bytes:
    data = text.encode() + b"\x00"
    return len(data).to_bytes(4, "little") + data


def _document(pairs: list[tuple[str, Element]]) -> bytes:
    body = b"".join(bytes((kind,)) + name.encode() + b"\x00" + data for name, (kind, data) in pairs)
    body += b"\x00"
    return (len(body) + 4).to_bytes(4, "little") + body


def _binary(subtype: int, data: bytes) -> Element:
    if subtype == 2:
        data = len(data).to_bytes(4, "little") + data
    return 0x05, len(data).to_bytes(4, "little") + bytes((subtype,)) + data


def _code_with_scope(code: str, scope: bytes) -> Element:
    body = _string(code) + scope
    return 0x0F, (len(body) + 4).to_bytes(4, "little") + body


LEAVES: st.SearchStrategy[Element] = st.one_of(
    st.floats().map(lambda x: (0x01, struct.pack("<d", x))),
    TEXT.map(lambda text: (0x02, _string(text))),
    st.builds(_binary, st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 0x80]), st.binary(max_size=40)),
    st.just((0x06, b"")),
    st.binary(min_size=12, max_size=12).map(lambda oid: (0x07, oid)),
    st.sampled_from([(0x08, b"\x00"), (0x08, b"\x01")]),
    st.integers(-(2**63), 2**63 - 1).map(lambda ms: (0x09, struct.pack("<q", ms))),
    st.integers(-(2**40), 2**40).map(lambda ms: (0x09, struct.pack("<q", ms * 1000))),
    st.just((0x0A, b"")),
    st.builds(
        lambda pattern, flags: (0x0B, pattern.encode() + b"\x00" + flags.encode() + b"\x00"),
        NAMES,
        st.text("ilmsuxga", max_size=6),
    ),
    st.builds(
        lambda ns, oid: (0x0C, _string(ns) + oid), NAMES, st.binary(min_size=12, max_size=12)
    ),
    TEXT.map(lambda code: (0x0D, _string(code))),
    TEXT.map(lambda text: (0x0E, _string(text))),
    st.integers(-(2**31), 2**31 - 1).map(lambda n: (0x10, struct.pack("<i", n))),
    st.integers(0, 2**64 - 1).map(lambda ts: (0x11, struct.pack("<Q", ts))),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: (0x12, struct.pack("<q", n))),
    DECIMALS.map(lambda d: (0x13, d.bid)),
    st.sampled_from([(0xFF, b""), (0x7F, b"")]),
)


def _containers(children: st.SearchStrategy[Element]) -> st.SearchStrategy[Element]:
    documents = st.dictionaries(NAMES, children, max_size=5).map(
        lambda d: (0x03, _document(list(d.items())))
    )
    arrays = st.lists(children, max_size=5).map(
        lambda items: (0x04, _document([(str(i), item) for i, item in enumerate(items)]))
    )
    scopes = st.builds(
        _code_with_scope,
        TEXT,
        st.dictionaries(NAMES, children, max_size=3).map(lambda d: _document(list(d.items()))),
    )
    return st.one_of(documents, arrays, scopes)


VALUES = st.recursive(LEAVES, _containers, max_leaves=15)
DOCUMENTS = st.dictionaries(NAMES, VALUES, max_size=6).map(lambda d: _document(list(d.items())))


def _dbref_fields() -> st.SearchStrategy[bytes]:
    """Subdocuments holding ``$ref``: DBRef-shaped or not, in any order, with extra fields."""
    ref = st.one_of(
        TEXT.map(lambda t: (0x02, _string(t))),
        TEXT.map(lambda t: (0x0E, _string(t))),
        TEXT.map(lambda t: (0x0D, _string(t))),
        LEAVES,
    )
    db = st.one_of(st.just((0x0A, b"")), st.just((0x06, b"")), ref)
    fields = st.fixed_dictionaries(
        {"$ref": ref}, optional={"$id": LEAVES, "$db": db, "a": LEAVES, "$x": LEAVES}
    )
    return st.builds(
        lambda d, order: _document(
            [("outer", (0x03, _document(sorted(d.items(), key=lambda kv: order.index(kv[0])))))]
        ),
        fields,
        st.permutations(["$ref", "$id", "$db", "a", "$x"]),
    )


def _expected(raw: bytes, options: Any) -> str:
    return json_util.dumps(
        bson.decode(raw, codec_options=OPLOG_CODEC_OPTIONS), json_options=options
    )


@WRITERS
@settings(max_examples=200)
@given(DOCUMENTS)
def test_canonical_text_is_json_utils(write: Writer, raw: bytes) -> None:
    assert write(raw) == _expected(raw, CANONICAL)


@WRITERS
@settings(max_examples=200)
@given(DOCUMENTS)
def test_relaxed_text_is_json_utils(write: Writer, raw: bytes) -> None:
    assert write(raw, relaxed=True) == _expected(raw, RELAXED)


@WRITERS
@given(_dbref_fields())
def test_dbref_shaped_subdocuments_are_written_as_pymongo_decodes_them(
    write: Writer, raw: bytes
) -> None:
    assert write(raw) == _expected(raw, CANONICAL)
    assert write(raw, relaxed=True) == _expected(raw, RELAXED)


@pytest.mark.parametrize(
    "value",
    [
        0.1, 1.0, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308,
        float("nan"), float("inf"), float("-inf"),
    ],
)  # fmt: skip
@WRITERS
def test_awkward_doubles(write: Writer, value: float) -> None:
    raw = bson.encode({"x": value})
    assert write(raw) == _expected(raw, CANONICAL)
    assert write(raw, relaxed=True) == _expected(raw, RELAXED)


@pytest.mark.parametrize(
    "text", ["é", "日本", "😀", "\x00\x01\n\t\x7f", 'q"b\\', "\u2028\u2029", "\x1f"]
)
@WRITERS
def test_strings_and_names_are_escaped_as_json_dumps_does(write: Writer, text: str) -> None:
    raw = _document([("k" + text.replace("\x00", ""), (0x02, _string(text)))])
    assert write(raw) == _expected(raw, CANONICAL)


@pytest.mark.parametrize(
    "millis", [0, 1, -1, 999, 253402300799999, 253402300800000, -62135596800000, -(2**63)]
)
@WRITERS
def test_dates_at_every_edge(write: Writer, millis: int) -> None:
    raw = _document([("d", (0x09, struct.pack("<q", millis)))])
    assert write(raw) == _expected(raw, CANONICAL)
    assert write(raw, relaxed=True) == _expected(raw, RELAXED)


@WRITERS
def test_decimal_specials(write: Writer) -> None:
    for text in ["NaN", "-NaN", "sNaN", "Infinity", "-Infinity", "-0", "0E-6176", "1E+6144"]:
        raw = bson.encode({"d": Decimal128(text)})
        assert write(raw) == _expected(raw, CANONICAL), text


@WRITERS
def test_a_repeated_name_is_written_twice_as_the_bytes_hold_it(write: Writer) -> None:
    raw = _document([("a", (0x10, struct.pack("<i", 1))), ("a", (0x10, struct.pack("<i", 2)))])
    assert write(raw) == '{"a": {"$numberInt": "1"}, "a": {"$numberInt": "2"}}'


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\x05\x00\x00\x00", "a BSON document of 5 bytes ending in NUL"),
        (
            b"\x08\x00\x00\x00\x21a\x00\x00",
            r"a known BSON type byte, got 0x21 \(value at offset 7\)",
        ),
        (b"\x09\x00\x00\x00\x08a\x00\x02\x00", "a boolean byte 0 or 1 at 7, got 2"),
        (bson.encode({"a": 1}) + b"\x00", "one BSON document of 13 bytes, its length says 12"),
        (b"\x09\x00\x00\x00\x10a\x00\x01\x00", "an event of well-formed BSON"),
    ],
)
@WRITERS
def test_malformed_bytes_name_what_was_expected(write: Writer, raw: bytes, expected: str) -> None:
    # An OplogError, never a bare ValueError: such bytes never reach it from an oplog (the
    # fast path's check, bson_check, and the reference's decode come first), but if they do.
    with pytest.raises(OplogError, match="expected " + expected):
        write(raw)


def _nested(levels: int) -> bytes:
    raw = bson.encode({"leaf": 1})
    for _ in range(levels):
        raw = _document([("d", (0x03, raw))])
    return raw


@WRITERS
def test_events_as_deep_as_entries_may_be_are_written(write: Writer) -> None:
    raw = _nested(extended_json.MAX_EVENT_NESTING)
    assert write(raw) == _expected(raw, CANONICAL)


@pytest.mark.parametrize("levels", [extended_json.MAX_EVENT_NESTING + 1, 5000])
@WRITERS
def test_deeper_bytes_are_an_oplog_error_not_a_recursion_error(write: Writer, levels: int) -> None:
    with pytest.raises(OplogError, match="levels of nested documents"):
        write(_nested(levels))


def test_the_compiled_writer_is_built() -> None:
    # setup.py builds it as optional (an install without a compiler still works); here,
    # where make installs with gcc, its absence means the build broke.
    assert extended_json._compiled is not None


@pytest.mark.parametrize(
    "document",
    [{"d": Decimal128("1.5")}, {"s": {"$ref": "c", "$id": 1}}, {"s": {"a": "$ref"}}],
    ids=["decimal", "dbref", "ref-in-a-value"],
)
def test_the_compiled_writer_leaves_the_walkers_cases_to_it(document: dict[str, Any]) -> None:
    raw = bson.encode(document)
    assert extended_json._compiled is not None
    assert extended_json._compiled(raw, False) is None
    assert bson_to_json(raw) == walk_bson_to_json(raw) == _expected(raw, CANONICAL)


C_LEAVES = LEAVES.filter(lambda element: element[0] != 0x13)  # Decimal128 is the walker's
C_DOCUMENTS = st.dictionaries(NAMES, st.recursive(C_LEAVES, _containers, max_leaves=15), max_size=6)


@settings(max_examples=300)
@given(C_DOCUMENTS, st.booleans())
def test_the_compiled_writer_itself_writes_every_other_type(
    document: dict[str, Element], relaxed: bool
) -> None:
    if any("$ref" in name for name in document):
        return  # a $ref name is the walker's (DBRef decoding)
    raw = _document(list(document.items()))
    assert extended_json._compiled is not None
    assert extended_json._compiled(raw, relaxed) == _expected(
        raw, RELAXED if relaxed else CANONICAL
    )
