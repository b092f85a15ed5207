"""``split_fields``: the compiled cut (``_event_split.c``) held to the Python walk, and both
held to ``bson.decode``.

Documents are generated element by element (every BSON type, repeated keys, regexes and
DBPointers at the top level; see test_bson_check.py), then damaged, then real change events
are cut as the sync cuts them.  Where a cut is given, the rest must decode to the document
without the named fields and each value's bytes to the value that was cut out; where it is
refused (None), the bytes must be unframed, hold a top-level regex / DBPointer, or repeat a
named field.
"""

from __future__ import annotations

import struct
from typing import Any

import bson
import pytest
from bson.errors import BSONError
from hypothesis import given
from hypothesis import strategies as st

from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.event_split import split_fields, split_fields_python
from tests.paths import as_read_from_file, strict
from tests.strategies import NAMES
from tests.transform.raw.test_bson_check import VALUES, _document, _string, damaged
from tests.transform.raw_corpus import generate_entries
from tests.transform.vector_cases import fast_path_events

compiled = pytest.importorskip("shardstream.transform.raw._ejson").split_fields

UNFRAMED = (0x0B, 0x0C)  # regex, DBPointer: not sized by the top-level walk
SYNC_CUT = ("fullDocument", "collectionUUID", "wallTime")
KEYS = st.one_of(NAMES, st.sampled_from(["a", "_id", "$ref", "fullDocument"]))


def _wrapped(kind: int, value: bytes) -> Any:
    """The value of (type byte, value bytes), decoded as the only field of a document."""
    element = bytes((kind,)) + b"v\x00" + value
    document = struct.pack("<i", len(element) + 5) + element + b"\x00"
    return bson.decode(document, OPLOG_CODEC_OPTIONS)["v"]


def _decodes(value: tuple[int, bytes]) -> bool:
    try:
        _wrapped(*value)
    except (BSONError, ValueError, TypeError):  # bad UTF-8 in a nested key, a bad DBRef ...
        return False
    return True


DECODABLE = VALUES.filter(_decodes)


def _both(raw: bytes, names: tuple[str, ...]) -> Any:
    got = compiled(raw, names)
    assert got == split_fields_python(raw, names)
    return got


def _assert_cut_is_the_decoded_document(raw: bytes, names: tuple[str, ...], got: Any) -> None:
    """``got`` (not None) against the decoded ``raw`` (which has no repeated top-level key)."""
    decoded = bson.decode(raw, OPLOG_CODEC_OPTIONS)
    rest, values = got
    expected_rest = {k: v for k, v in decoded.items() if k not in names}
    assert strict(bson.decode(rest, OPLOG_CODEC_OPTIONS)) == strict(expected_rest)
    assert len(values) == len(names)
    removed = 0
    for name, value in zip(names, values, strict=True):
        assert (value is None) == (name not in decoded)
        if value is not None:
            assert strict(_wrapped(*value)) == strict(decoded[name])
            removed += 2 + len(name.encode()) + len(value[1])  # type byte, name, NUL, value
    assert len(rest) == len(raw) - removed


Case = tuple[bytes, tuple[str, ...], list[tuple[str, int]]]


@st.composite
def documents(draw: st.DrawFn, unique: bool) -> Case:
    """(document, names to cut, its top-level (key, type byte) pairs); ``unique``: no key
    repeats and every value decodes."""
    pairs = draw(
        st.lists(
            st.tuples(KEYS, DECODABLE if unique else VALUES),
            max_size=6,
            unique_by=(lambda p: p[0]) if unique else None,
        )
    )
    keys = [key for key, _ in pairs]
    present = st.sampled_from(keys) if keys else NAMES
    names = draw(
        st.lists(st.one_of(present, present, KEYS).filter(bool), max_size=4, unique=True).map(tuple)
    )
    raw = _document([(key.encode(), value) for key, value in pairs])
    return raw, names, [(key, kind) for key, (kind, _) in pairs]


@given(documents(unique=False))
def test_the_compiled_cut_is_the_python_cut(case: Case) -> None:
    raw, names, elements = case
    got = _both(raw, names)
    keys = [key for key, _ in elements]
    refused = any(kind in UNFRAMED for _, kind in elements) or any(
        keys.count(name) > 1 for name in names
    )
    assert (got is None) is refused
    assert split_fields(raw, names) == got


@given(damaged(), st.lists(st.sampled_from(["a", "_id", "$ref", "b"]), max_size=3, unique=True))
def test_damaged_bytes_are_cut_alike(raw: bytes, names: list[str]) -> None:
    _both(raw, tuple(names))


@given(documents(unique=True))
def test_a_cut_decodes_to_the_document_without_the_named_fields(case: Case) -> None:
    raw, names, elements = case
    got = _both(raw, names)
    if any(kind in UNFRAMED for _, kind in elements):
        assert got is None
        return
    assert got is not None  # framed, and no repeated key: always cut
    _assert_cut_is_the_decoded_document(raw, names, got)


def _element(name: bytes, kind: int, value: bytes) -> tuple[bytes, tuple[int, bytes]]:
    return name, (kind, value)


INT_1 = _element(b"a", 0x10, b"\x01\x00\x00\x00")
INT_2 = _element(b"a", 0x10, b"\x02\x00\x00\x00")
TEXT_B = _element(b"b", 0x02, _string(b"hi"))
DOC = _document([INT_1, TEXT_B])
REGEX = _element(b"r", 0x0B, b"^x\x00i\x00")
DB_POINTER = _element(b"p", 0x0C, _string(b"db.c") + bytes(12))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        DOC[:4],
        DOC[:-1],  # truncated
        struct.pack("<i", len(DOC) + 1) + DOC[4:],  # the length prefix disagrees
        struct.pack("<i", len(DOC) - 1) + DOC[4:],
        DOC + b"\x00",  # a byte after the document
        DOC[:-1] + b"\x01",  # no final NUL
        _document([INT_1, TEXT_B]).replace(b"\x02b", b"\x99b"),  # a type byte not BSON's
        _document([INT_1, TEXT_B, INT_2]),  # "a" named and repeated
        _document([INT_1, REGEX]),  # a regex at the top level, even unnamed
        _document([DB_POINTER, INT_1]),
    ],
)
def test_refusals(raw: bytes) -> None:
    assert _both(raw, ("a",)) is None


def test_a_repeated_unnamed_field_is_kept_and_a_nested_regex_is_cut() -> None:
    raw = _document([INT_1, TEXT_B, INT_2, _element(b"n", 0x03, _document([REGEX]))])
    rest, values = _both(raw, ("b", "n"))
    assert rest == _document([INT_1, INT_2])  # both "a"s, in their order
    assert values[0] == (0x02, _string(b"hi"))
    assert values[1] == (0x03, _document([REGEX]))
    assert bson.decode(values[1][1])["r"].pattern == "^x"


def test_the_compiled_cut_takes_at_most_8_non_empty_names() -> None:
    names = tuple(f"n{i}" for i in range(8))
    assert _both(DOC, names) == (DOC, (None,) * 8)
    with pytest.raises(ValueError, match="at most 8"):
        compiled(DOC, (*names, "a"))
    with pytest.raises(ValueError, match="non-empty"):
        compiled(DOC, ("a", ""))
    with pytest.raises(ValueError, match="non-empty"):
        compiled(DOC, (b"a",))


def _real_events() -> list[bytes]:
    """Fast-path event bytes: every transform vector (its options, the sync's) and a corpus."""
    sync = ChangeStreamOptions(show_expanded_events=True, show_raw_update_description=True)
    return fast_path_events(sync, [as_read_from_file(generate_entries(300, 7))])


REAL_EVENTS = _real_events()


def test_real_events_are_cut_as_the_sync_cuts_them() -> None:
    found = dict.fromkeys(SYNC_CUT, 0)
    for raw in REAL_EVENTS:
        got = _both(raw, SYNC_CUT)
        assert got is not None
        _assert_cut_is_the_decoded_document(raw, SYNC_CUT, got)
        for name, value in zip(SYNC_CUT, got[1], strict=True):
            found[name] += value is not None
    assert len(REAL_EVENTS) > 200
    assert all(count > 20 for count in found.values()), found


@pytest.mark.parametrize("names", [("a", "a"), ("a\x00",), ("a\x00b",), ("",)])
def test_names_twice_empty_or_holding_nul_are_refused_alike(names: tuple[str, ...]) -> None:
    # C compares names as C strings (a NUL would end them) with one slot per name.
    with pytest.raises(ValueError, match="distinct non-empty str names"):
        compiled(DOC, names)
    with pytest.raises(ValueError, match="distinct non-empty str names"):
        split_fields_python(DOC, names)


@pytest.mark.parametrize(("kind", "length"), [(0x02, 0), (0x03, 4), (0x05, -1)])
def test_a_value_shorter_than_its_type_allows_is_refused_alike(kind: int, length: int) -> None:
    # A string's length counts its NUL (>= 1), a binary's is >= 0, a document is >= 5
    # bytes: C refuses lengths below that (value_end), and so does the Python walk.
    raw = _document([_element(b"a", kind, struct.pack("<i", length))])
    assert _both(raw, ("a",)) is None
