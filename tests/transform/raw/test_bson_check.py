"""The fast path's check of an entry's bytes (``bson_check``): C against Python, and both
against pymongo.

What the check accepts, the fast path copies; so acceptance must mean what the reference path
would do with the bytes succeeds and gives them back unchanged: ``bson.decode`` with
``OPLOG_CODEC_OPTIONS`` succeeds, the reference's event encoder (``encode_event_document``)
writes the decoded value back byte for byte, and the nesting is within the server's limit.
Documents are generated element by element (every BSON type, the ones that do not round-trip
too, repeated and misnumbered keys) and then damaged byte by byte.
"""

from __future__ import annotations

import struct
from typing import Any

import bson
import pytest
from bson.errors import BSONError
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.oplog.bson_depth import MAX_NESTING, nesting_beyond_limit
from shardstream.transform.raw import bson_check
from shardstream.transform.raw.bson_check import check_entry
from shardstream.transform.raw.event_writer import encode_event_document
from tests.strategies import DECIMALS, NAMES, TEXT

compiled = pytest.importorskip("shardstream.transform.raw._ejson").valid_entry

Element = tuple[int, bytes]  # type byte, value bytes


def _string(text: bytes) -> bytes:
    return (len(text) + 1).to_bytes(4, "little") + text + b"\x00"


def _document(pairs: list[tuple[bytes, Element]]) -> bytes:
    body = b"".join(bytes((kind,)) + name + b"\x00" + value for name, (kind, value) in pairs)
    return (len(body) + 5).to_bytes(4, "little") + body + b"\x00"


def _binary(subtype: int, data: bytes) -> Element:
    if subtype == 2:
        data = len(data).to_bytes(4, "little") + data
    return 0x05, len(data).to_bytes(4, "little") + bytes((subtype,)) + data


UTF8 = TEXT.map(str.encode)
KEYS = st.one_of(NAMES.map(str.encode), st.sampled_from([b"a", b"_id", b"$ref", b"\xff"]))
LEAVES: st.SearchStrategy[Element] = st.one_of(
    st.floats().map(lambda x: (0x01, struct.pack("<d", x))),
    UTF8.map(lambda text: (0x02, _string(text))),
    st.builds(_binary, st.sampled_from([0, 1, 2, 3, 4, 5, 9, 0x80]), st.binary(max_size=20)),
    st.just((0x06, b"")),
    st.binary(min_size=12, max_size=12).map(lambda oid: (0x07, oid)),
    st.sampled_from([(0x08, b"\x00"), (0x08, b"\x01")]),
    st.integers(-(2**63), 2**63 - 1).map(lambda ms: (0x09, struct.pack("<q", ms))),
    st.just((0x0A, b"")),
    st.builds(
        lambda pattern, flags: (0x0B, pattern + b"\x00" + flags.encode() + b"\x00"),
        NAMES.map(str.encode),
        st.text("ilmsuxg", max_size=4),
    ),
    st.builds(lambda ns, oid: (0x0C, _string(ns) + oid), UTF8, st.binary(min_size=12, max_size=12)),
    UTF8.map(lambda code: (0x0D, _string(code))),
    UTF8.map(lambda text: (0x0E, _string(text))),
    st.integers(-(2**31), 2**31 - 1).map(lambda n: (0x10, struct.pack("<i", n))),
    st.integers(0, 2**64 - 1).map(lambda ts: (0x11, struct.pack("<Q", ts))),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: (0x12, struct.pack("<q", n))),
    DECIMALS.map(lambda d: (0x13, d.bid)),
    st.sampled_from([(0xFF, b""), (0x7F, b"")]),
)


def _containers(children: st.SearchStrategy[Element]) -> st.SearchStrategy[Element]:
    documents = st.lists(st.tuples(KEYS, children), max_size=5).map(
        lambda pairs: (0x03, _document(pairs))
    )
    arrays = st.builds(
        lambda items, skew: (
            0x04,
            _document(
                [(str(i + (skew if i == 1 else 0)).encode(), item) for i, item in enumerate(items)]
            ),
        ),
        st.lists(children, max_size=4),
        st.sampled_from([0, 0, 0, 1]),  # now and then a key out of order
    )
    scopes = st.builds(
        lambda code, scope: (0x0F, _code_with_scope(code, scope)),
        UTF8,
        st.lists(st.tuples(KEYS, children), max_size=2).map(_document),
    )
    return st.one_of(documents, arrays, scopes)


def _code_with_scope(code: bytes, scope: bytes) -> bytes:
    body = _string(code) + scope
    return (len(body) + 4).to_bytes(4, "little") + body


VALUES = st.recursive(LEAVES, _containers, max_leaves=12)
DOCUMENTS = st.lists(st.tuples(KEYS, VALUES), max_size=6).map(_document)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A generated document, with up to 3 bytes overwritten (often none)."""
    raw = bytearray(draw(DOCUMENTS))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        at = draw(st.integers(0, len(raw) - 1))
        raw[at] = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 0x7F, 0x80, 0xC0, 0xFF, raw[at] ^ 1]))
    return bytes(raw)


def _decodes_and_round_trips(raw: bytes) -> bool:
    try:
        decoded = bson.decode(raw, codec_options=OPLOG_CODEC_OPTIONS)
    except (BSONError, ValueError, OverflowError):
        return False
    return encode_event_document(decoded) == raw


@settings(max_examples=600)
@given(damaged(), st.one_of(st.just(MAX_NESTING), st.integers(0, 6)))
def test_the_compiled_check_is_the_python_check(raw: bytes, max_nesting: int) -> None:
    assert compiled(raw, max_nesting) is check_entry(raw, max_nesting)


@settings(max_examples=600)
@given(damaged())
def test_what_the_check_accepts_decodes_and_round_trips(raw: bytes) -> None:
    if check_entry(raw):
        assert _decodes_and_round_trips(raw)
        assert nesting_beyond_limit(raw) is None


@settings(max_examples=300)
@given(
    st.dictionaries(
        NAMES.filter(lambda name: name != "$ref"),
        st.recursive(
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(-(2**63), 2**63 - 1),
                st.floats(allow_nan=False),
                TEXT,
                DECIMALS,
            ),
            lambda children: st.one_of(
                st.lists(children, max_size=3),
                st.dictionaries(NAMES.filter(lambda name: name != "$ref"), children, max_size=3),
            ),
            max_leaves=10,
        ),
        max_size=6,
    )
)
def test_what_pymongo_writes_is_accepted(document: dict[str, Any]) -> None:
    # The fast path's common case must stay fast: anything bson.encode writes passes.
    raw = bson.encode(document)
    assert compiled(raw)
    assert check_entry(raw)


def _entry(*pairs: tuple[bytes, Element]) -> bytes:
    return _document(list(pairs))


GOOD = _entry((b"s", (0x02, _string(b"hello"))), (b"n", (0x03, _entry((b"b", (0x08, b"\x01"))))))
DAMAGED = {
    "bad UTF-8 in a string": GOOD.replace(b"hello", b"h\xffllo"),
    "bad UTF-8 in a key": GOOD.replace(b"\x02s\x00", b"\x02\xff\x00"),
    "overlong UTF-8": GOOD.replace(b"hello", b"h\xc0\xaflo"),
    "surrogate": GOOD.replace(b"hello", b"\xed\xa0\x80lo"),
    "broken nested length": GOOD.replace(b"\x03n\x00\x09", b"\x03n\x00\x0a"),
    "zeroed type byte": GOOD.replace(b"\x02s\x00", b"\x00s\x00"),
    "bool byte 2": GOOD.replace(b"\x08b\x00\x01", b"\x08b\x00\x02"),
    "string without its NUL": GOOD.replace(b"hello\x00", b"hellox"),
    "key without its NUL": _entry((b"s", (0x0A, b""))).replace(b"s\x00\x00", b"ss\x00"),
    "repeated key": _entry((b"a", (0x0A, b"")), (b"a", (0x0A, b""))),
    "array keys out of order": _entry((b"l", (0x04, _entry((b"1", (0x0A, b"")))))),
    "symbol": _entry((b"s", (0x0E, _string(b"x")))),
    "undefined": _entry((b"u", (0x06, b""))),
    "$ref without $id": _entry((b"d", (0x03, _entry((b"$ref", (0x02, _string(b"c"))))))),
    "regex flags out of order": _entry((b"r", (0x0B, b"a\x00xi\x00"))),
    "binary subtype 2 inner length": _entry(
        (b"b", (0x05, b"\x05\x00\x00\x00\x02\x02\x00\x00\x00x"))
    ),
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_each_kind_of_damage_is_not_vouched_for(name: str) -> None:
    assert check_entry(GOOD)
    assert compiled(GOOD)
    raw = DAMAGED[name]
    assert raw != GOOD
    assert not check_entry(raw)
    assert not compiled(raw)


def _nested(levels: int) -> bytes:
    raw = _entry((b"leaf", (0x10, b"\x01\x00\x00\x00")))
    for _ in range(levels):
        raw = _entry((b"d", (0x03, raw)))
    return raw


def test_the_server_depth_limit() -> None:
    # server: BSONDepth::kDefaultMaxAllowableDepth, as validateBSON counts levels below the top
    assert MAX_NESTING == 200
    at_limit, beyond = _nested(MAX_NESTING), _nested(MAX_NESTING + 1)
    assert compiled(at_limit)
    assert check_entry(at_limit)
    assert nesting_beyond_limit(at_limit) is None
    assert not compiled(beyond)
    assert not check_entry(beyond)
    assert nesting_beyond_limit(beyond) == MAX_NESTING + 1
    assert nesting_beyond_limit(_nested(5000)) == 5000  # no recursion: no RecursionError
    # A part of an entry (o, one level down) is held to what is left of the limit.
    assert compiled(_nested(MAX_NESTING - 1), MAX_NESTING - 1)
    assert check_entry(_nested(MAX_NESTING - 1), MAX_NESTING - 1)
    assert not compiled(at_limit, MAX_NESTING - 1)
    assert not check_entry(at_limit, MAX_NESTING - 1)


def test_the_module_uses_the_compiled_check() -> None:
    assert bson_check.valid_entry is compiled


_DBREF = (b"$ref", (0x02, _string(b"c")))
_ID = (b"$id", (0x10, b"\x01\x00\x00\x00"))
_DB = (b"$db", (0x02, _string(b"d")))
_EXTRA = (b"x", (0x0A, b""))


@pytest.mark.parametrize(
    ("pairs", "vouched"),
    [
        ([_DBREF, _ID], True),
        ([_DBREF, _ID, _DB, _EXTRA], True),
        ([_DBREF, _ID, _EXTRA], True),
        ([_ID, _DBREF], False),  # decoded as a DBRef: written back $ref first
        ([_DBREF, _ID, _EXTRA, _DB], False),  # $db comes back third
        ([_DBREF, _ID, (b"$db", (0x0A, b""))], False),  # a null $db is dropped
        ([_DBREF], False),
        ([(b"$ref", (0x10, b"\x01\x00\x00\x00")), _ID], False),
    ],
)
def test_a_dbref_is_vouched_for_only_in_the_order_it_is_written_back(
    pairs: list[tuple[bytes, Element]], vouched: bool
) -> None:
    # pymongo decodes {$ref: <str>, $id, ...} to a DBRef, which bson.encode writes as $ref,
    # $id, $db (unless None), then the other fields.
    raw = _entry((b"d", (0x03, _document(pairs))))
    assert compiled(raw) is check_entry(raw) is vouched
    if vouched:
        assert _decodes_and_round_trips(raw)
