"""updateDescription from ``$v:2`` diffs, 6.x legacy updates, rawUpdateDescription, FieldList.

Expectations come from tests/data/transform_cases.json (the server's unit tests and
jstests), the examples of the team's reference notes (shared/docs/transform.md
section 3.2), and the error codes of ``document_diff_serialization.cpp``. Comparisons are
made on canonical Extended JSON pair lists, so value types, field order and repeated keys
all count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import TransformError
from shardstream.transform.field_list import FieldList, mapping_from_pairs
from shardstream.transform.update.legacy_update_description import (
    legacy_update_description,
    raw_update_description,
)
from shardstream.transform.update.update_description import parse_update_diff
from tests.strategies import DECIMALS, INT32, INT64, OBJECT_IDS, TEXT, TIMESTAMPS

CANONICAL = json_util.CANONICAL_JSON_OPTIONS


def _load_hook(pairs: list[tuple[str, Any]]) -> Any:
    # Repeated keys must survive loading; Extended JSON wrappers never repeat theirs.
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        return FieldList(pairs)
    return json_util.object_pairs_hook(pairs, CANONICAL)


CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "data" / "transform_cases.json").read_text(),
    object_pairs_hook=_load_hook,
)


def canon(value: Any) -> Any:
    """A value as nested pair lists of canonical Extended JSON scalars."""
    if isinstance(value, RawBSONDocument):
        value = FieldList.from_bson(value)
    if isinstance(value, Mapping):
        return ("doc", [(name, canon(item)) for name, item in value.items()])
    if isinstance(value, list | tuple):
        return ("array", [canon(item) for item in value])
    return json_util.dumps(value, json_options=CANONICAL)


def parse(diff: Any, expanded: bool = True) -> dict[str, Any]:
    return parse_update_diff(diff, with_disambiguated_paths=expanded)


# --- the vector file --------------------------------------------------------------------------


def _update_entries(case: dict[str, Any]) -> list[Mapping[str, Any]]:
    entries: list[Mapping[str, Any]] = []
    for entry in case["oplog"]:
        if entry["op"] == "c" and "applyOps" in entry["o"]:
            entries += entry["o"]["applyOps"]
        else:
            entries.append(entry)
    return [e for e in entries if e["op"] == "u" and "_id" not in e["o"]]


def _described(case: dict[str, Any]) -> list[Mapping[str, Any]]:
    return [e["updateDescription"] for e in case["expected"] if "updateDescription" in e]


DELTA_CASES = [
    c for c in CASES if _described(c) and all(e["o"].get("$v") == 2 for e in _update_entries(c))
]
LEGACY_CASES = [
    c for c in CASES if _described(c) and all("$v" not in e["o"] for e in _update_entries(c))
]


def test_vector_file_has_the_expected_update_cases() -> None:
    assert len(DELTA_CASES) >= 20
    assert [c["name"] for c in LEGACY_CASES] == ["update_v1_legacy_unset_6x"]


@pytest.mark.parametrize("case", DELTA_CASES, ids=lambda c: c["name"])
@pytest.mark.parametrize("raw", [False, True], ids=["dict", "raw"])
def test_vector_delta_updates(case: dict[str, Any], raw: bool) -> None:
    entries = _update_entries(case)
    expected = _described(case)
    assert len(entries) == len(expected)
    for entry, description in zip(entries, expected, strict=True):
        diff = entry["o"]["diff"]
        if raw:
            diff = RawBSONDocument(bson.encode(diff))
        got = parse(diff, case["options"]["showExpandedEvents"])
        assert canon(got) == canon(description)


@pytest.mark.parametrize("case", LEGACY_CASES, ids=lambda c: c["name"])
def test_vector_legacy_updates(case: dict[str, Any]) -> None:
    (entry,) = _update_entries(case)
    (description,) = _described(case)
    assert canon(legacy_update_description(entry["o"])) == canon(description)


# --- shared/docs/transform.md section 3.2 and the server's diff parser unit tests ------------


@pytest.mark.parametrize(
    ("diff", "expected"),
    [
        pytest.param(
            {"sa": {"s0": {"a": True, "u0": 1}}},
            {"updatedFields": {"a.0.0": 1}, "disambiguatedPaths": {"a.0.0": ["a", "0", 0]}},
            id="numeric-field-vs-index",
        ),
        pytest.param(
            {"sa.b": {"a": True, "l": 5}, "sc": {"s0": {"a": True, "l": 5}}},
            {
                "truncatedArrays": [{"field": "a.b", "newSize": 5}, {"field": "c.0", "newSize": 5}],
                "disambiguatedPaths": {"a.b": ["a.b"], "c.0": ["c", "0"]},
            },
            id="truncation",
        ),
        pytest.param({"u": {"0": 1}}, {"updatedFields": {"0": 1}}, id="numeric-at-root"),
        pytest.param({"sa": {"u": {"01": 1}}}, {"updatedFields": {"a.01": 1}}, id="leading-zero"),
        pytest.param(
            {"sa": {"a": True, "s0": {"u": {"b": 1}}}},
            {"updatedFields": {"a.0.b": 1}},
            id="indexes-only",
        ),
        pytest.param(
            {"u": {"a.b": 2}, "sa": {"u": {"b": 1}}},
            {
                "updatedFields": FieldList([("a.b", 2), ("a.b", 1)]),
                "disambiguatedPaths": {"a.b": ["a.b"]},
            },
            id="repeated-key",
        ),
        pytest.param(
            {"d": {"a": False}, "u": {"c": 1}, "i": {"e": 1}},
            {"updatedFields": {"c": 1, "e": 1}, "removedFields": ["a"]},
            id="u-i-then-d",
        ),
        pytest.param(
            {"d": {"a.b": False}, "sc": {"d": {"0": False}}},
            {
                "removedFields": ["a.b", "c.0"],
                "disambiguatedPaths": {"a.b": ["a.b"], "c.0": ["c", "0"]},
            },
            id="removed",
        ),
        pytest.param(
            {"u": {"x": 1}, "i": {"y": 2}, "b": {"z": b"\x00"}, "sq": {"u": {"r": 3}}},
            {"updatedFields": {"x": 1, "y": 2, "z": b"\x00", "q.r": 3}},
            id="u-i-b-then-sub-diffs",
        ),
        pytest.param(
            {"s": {"a": True, "u0": 1}, "ss": {"u": {"": 2}}},
            {"updatedFields": {".0": 1, "s.": 2}},
            id="empty-and-s-names",
        ),
        pytest.param(
            {"sa": {"a": True, "u007": 1, "s4294967295": {"u": {"b": 1}}}},
            {"updatedFields": {"a.7": 1, "a.4294967295.b": 1}},
            id="index-leading-zeros-and-uint32-max",
        ),
        pytest.param(
            {"d": {"a.b": False}, "u": {"a.b": 1}},
            {
                "updatedFields": {"a.b": 1},
                "removedFields": ["a.b"],
                "disambiguatedPaths": FieldList([("a.b", ["a.b"]), ("a.b", ["a.b"])]),
            },
            id="repeated-disambiguated-path",
        ),
        pytest.param(
            {"sa": {"u": {"\u0661": 1}}},
            {"updatedFields": {"a.\u0661": 1}},
            id="non-ascii-digit-is-not-numeric",
        ),
    ],
)
def test_examples(diff: dict[str, Any], expected: dict[str, Any]) -> None:
    full = {
        "updatedFields": {},
        "removedFields": [],
        "truncatedArrays": [],
        "disambiguatedPaths": {},
        **expected,
    }
    assert canon(parse(diff)) == canon(full)
    assert canon(parse(RawBSONDocument(bson.encode(diff)))) == canon(full)


def test_without_disambiguated_paths_the_key_is_absent() -> None:
    got = parse({"u": {"a.b": 1}}, expanded=False)
    assert list(got) == ["updatedFields", "removedFields", "truncatedArrays"]
    assert list(parse({"u": {"a": 1}})) == [*got, "disambiguatedPaths"]


def test_values_and_types_are_copied_verbatim() -> None:
    nested = RawBSONDocument(bson.encode({"y": 1, "x": Int64(2)}))
    value = {"k": [1, 2.0]}
    got = parse({"u": {"a": nested, "b": Int64(3), "c": value}, "sl": {"a": True, "l": 0}})
    assert got["updatedFields"]["a"] is nested
    assert got["updatedFields"]["c"] is value
    assert type(got["updatedFields"]["b"]) is Int64
    bson.encode(got)  # the whole description encodes
    assert canon(got["truncatedArrays"]) == canon([{"field": "l", "newSize": 0}])


def test_raw_diff_with_repeated_names_keeps_them() -> None:
    # Only raw BSON can repeat a name; the server reads every element.
    body = bson.encode({"a": False})[4:-1] * 2
    removed = RawBSONDocument((len(body) + 5).to_bytes(4, "little") + body + b"\x00")
    assert parse({"d": removed})["removedFields"] == ["a", "a"]
    section = bson.encode({"u": {"x": 1}})[4:-1] * 2
    diff = RawBSONDocument((len(section) + 5).to_bytes(4, "little") + section + b"\x00")
    with pytest.raises(TransformError) as caught:
        parse(diff)
    assert caught.value.code == 4770503


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("diff", "code"),
    [
        ({}, 4770500),
        ({"sa": {}}, 4770500),
        ({"x": {}}, 4770503),
        ({"a": True}, 4770503),  # the root is never an array diff
        ({"u": {}, "d": {}}, 4770503),
        ({"i": {}, "u": {}}, 4770503),
        ({"sa": {"u": {}}, "u": {}}, 4770514),
        ({"": {}}, 4770505),
        ({"u": 1}, 4770507),
        ({"d": [False]}, 4770507),
        ({"sa": 1}, 4770507),
        ({"sa": {"u": {}}, "sb": 1}, 470510),
        ({"sa": {"a": 1}}, 4770519),
        ({"sa": {"a": False}}, 4770520),
        ({"sa": {"a": True, "l": 1.0}}, 4770507),
        ({"sa": {"a": True, "l": Int64(1)}}, 4770507),
        ({"sa": {"a": True, "l": 2**31}}, 4770507),
        ({"sa": {"a": True, "l": True}}, 4770507),
        ({"sa": {"a": True, "u": 1}}, 4770521),
        ({"sa": {"a": True, "u-1": 1}}, 4770512),
        ({"sa": {"a": True, "u+1": 1}}, 4770512),
        ({"sa": {"a": True, "u1_0": 1}}, 4770512),
        ({"sa": {"a": True, "u4294967296": 1}}, 4770512),
        ({"sa": {"a": True, "x1": 1}}, 4770502),
        ({"sa": {"a": True, "d1": 1}}, 4770502),
        ({"sa": {"a": True, "s0": 1}}, 4770501),
        ({"sa": {"a": True, "s0": {}}}, 4770500),
        ({"sa": {"a": True, "s0": {"q": {}}}}, 4770503),
    ],
)
def test_errors(diff: dict[str, Any], code: int) -> None:
    for form in (diff, RawBSONDocument(bson.encode(diff))):
        with pytest.raises(TransformError) as caught:
            parse(form)
        assert caught.value.code == code
        assert caught.value.ts is None
        assert "expected" in str(caught.value)


def test_index_past_int32_in_an_ambiguous_path() -> None:
    # The server turns the index into an int with std::stoi, which throws: no error code.
    assert parse({"sa": {"a": True, "u2147483648": 1}})["updatedFields"] == {"a.2147483648": 1}
    with pytest.raises(TransformError) as caught:
        parse({"sa.b": {"a": True, "u2147483648": 1}})
    assert caught.value.code is None
    assert parse({"sa.b": {"a": True, "u2147483647": 1}})["disambiguatedPaths"] == {
        "a.b.2147483647": ["a.b", 2147483647]
    }


def test_first_error_in_walk_order_wins() -> None:
    # The reader checks sub-diffs lazily: an earlier sub-diff's error comes first.
    with pytest.raises(TransformError) as caught:
        parse({"sa": {"a": True, "s0": {}}, "u": {}})
    assert caught.value.code == 4770500


def test_sections_are_known_by_their_first_character() -> None:
    # DocumentDiffReader looks only at a section name's first character.
    assert parse({"delete": {"a": False}, "update": {"b": 1}})["updatedFields"] == {"b": 1}


def test_diff_must_be_an_object() -> None:
    with pytest.raises(TransformError) as caught:
        parse_update_diff([1], with_disambiguated_paths=False)  # type: ignore[arg-type]
    assert caught.value.code == 40532


def test_error_can_be_tied_to_an_entry() -> None:
    with pytest.raises(TransformError) as caught:
        parse({})
    assert "entry ts 5" in str(caught.value.at(5))


# --- legacy and raw ---------------------------------------------------------------------------


def test_legacy_update_description() -> None:
    o = {"$v": 1, "$set": {"a": 1, "b.c": Int64(2)}, "$unset": {"x": True, "y": ""}}
    got = legacy_update_description(o)
    assert canon(got) == canon({"updatedFields": o["$set"], "removedFields": ["x", "y"]})
    assert legacy_update_description({"$unset": 5}) == {"updatedFields": {}, "removedFields": []}
    assert legacy_update_description({"$set": 5})["updatedFields"] == 5  # copied whatever it is
    raw = RawBSONDocument(bson.encode(o))
    assert canon(legacy_update_description(raw)) == canon(got)
    with pytest.raises(TransformError):
        legacy_update_description([])  # type: ignore[arg-type]


def test_raw_update_description_is_o_untouched() -> None:
    o = {"$v": 2, "diff": {"u": {"a": 1}}}
    assert raw_update_description(o) is o


# --- FieldList --------------------------------------------------------------------------------


def test_field_list_mapping_behaviour() -> None:
    fields = FieldList([("a.b", 2), ("c", 3), ("a.b", 1)])
    assert fields["a.b"] == 2
    assert list(fields) == ["a.b", "c", "a.b"]
    assert len(fields) == 3
    assert list(fields.items()) == [("a.b", 2), ("c", 3), ("a.b", 1)]
    assert list(fields.values()) == [2, 3, 1]
    assert ("a.b", 1) in fields.items()
    assert "c" in fields
    assert "z" not in fields
    assert fields.get("z") is None
    assert fields.has_duplicates
    assert fields == FieldList([("a.b", 2), ("c", 3), ("a.b", 1)])
    assert fields != FieldList([("a.b", 1), ("c", 3), ("a.b", 2)])
    assert fields != {"a.b": 2, "c": 3}
    assert FieldList([("x", 1), ("y", 2)]) == {"x": 1, "y": 2}
    assert FieldList([("x", 1), ("y", 2)]) != {"y": 2, "x": 1}  # order counts, as in BSON
    assert FieldList() == {}
    assert repr(FieldList([("x", 1)])) == "FieldList([('x', 1)])"
    with pytest.raises(KeyError):
        fields["z"]
    with pytest.raises(TypeError):
        hash(fields)


def test_mapping_from_pairs() -> None:
    assert type(mapping_from_pairs([("a", 1), ("b", 2)])) is dict
    assert mapping_from_pairs([("a", 1), ("a", 2)]) == FieldList([("a", 1), ("a", 2)])


def test_field_list_to_raw_bson_keeps_repeats() -> None:
    inner = FieldList([("k", 1), ("k", Int64(2))])
    fields = FieldList([("a.b", 2), ("a.b", {"x": [inner]}), ("c", "s")])
    raw = fields.to_raw_bson()
    assert isinstance(raw, RawBSONDocument)
    expected_body = b"".join(
        bson.encode({name: value})[4:-1]
        for name, value in [("a.b", 2), ("a.b", {"x": [inner.to_raw_bson()]}), ("c", "s")]
    )
    assert raw.raw[4:-1] == expected_body
    assert int.from_bytes(raw.raw[:4], "little") == len(raw.raw)
    (decoded,) = bson.decode_all(raw.raw)  # a dict keeps one "a.b"; the raw form has both
    assert list(decoded) == ["a.b", "c"]
    back = FieldList.from_bson(raw)
    assert canon(back) == canon(fields)
    assert list(FieldList.from_bson(inner.to_raw_bson()).items()) == [("k", 1), ("k", Int64(2))]
    assert FieldList.from_bson(FieldList().to_raw_bson()) == {}


def test_field_list_from_bson_rejects_garbage() -> None:
    with pytest.raises(bson.errors.InvalidBSON):
        FieldList.from_bson(b"\x05\x00\x00\x00")
    with pytest.raises(bson.errors.InvalidBSON):
        FieldList.from_bson(b"\x0c\x00\x00\x00\x02a\x00\xf0\xff\xff\xff\x00")


# --- properties -------------------------------------------------------------------------------

NAMES = st.text(alphabet="ab.019s", max_size=4)
LEAVES = st.one_of(st.none(), st.booleans(), INT32, INT64, TEXT, OBJECT_IDS, TIMESTAMPS, DECIMALS)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)


def diffs(depth: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    """Valid ``$v:2`` document diffs, sections in the writer's order."""
    sections = st.fixed_dictionaries(
        {},
        optional={
            "d": st.dictionaries(NAMES, st.just(False), max_size=3),
            "u": st.dictionaries(NAMES, VALUES, max_size=3),
            "i": st.dictionaries(NAMES, VALUES, max_size=3),
            "b": st.dictionaries(NAMES, st.binary(max_size=4), max_size=2),
        },
    )
    subs = (
        st.dictionaries(NAMES, array_diffs(depth - 1) | diffs(depth - 1), max_size=2)
        if depth > 0
        else st.just({})
    )
    return st.builds(
        lambda found, sub: (
            {
                **{kind: found[kind] for kind in "duib" if kind in found},
                **{"s" + name: diff for name, diff in sub.items()},
            }
            or {"u": {}}
        ),
        sections,
        subs,
    )


def array_diffs(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    entries = st.dictionaries(
        st.integers(0, 2**32 - 1) | st.integers(0, 12),
        st.tuples(st.booleans(), VALUES, diffs(depth - 1) if depth > 0 else st.just({"u": {}})),
        max_size=3,
    )
    return st.builds(
        lambda size, found: {
            "a": True,
            **({"l": size} if size is not None else {}),
            **{
                (f"u{i}" if plain else f"s{i}"): (value if plain else sub)
                for i, (plain, value, sub) in sorted(found.items())
            },
        },
        st.none() | st.integers(0, 2**31 - 1),
        entries,
    )


def _reference(diff: Mapping[str, Any]) -> list[tuple[str, list[Any], Any]]:
    """A second, simpler model: ``(kind, path parts, value)`` for each record, in walk order."""
    out: list[tuple[str, list[Any], Any]] = []

    def walk(node: Mapping[str, Any], path: list[Any]) -> None:
        if next(iter(node)) == "a":
            if "l" in node:
                out.append(("truncated", path, node["l"]))
            for name, value in node.items():
                if name[0] == "u":
                    out.append(("updated", [*path, int(name[1:])], value))
                elif name[0] == "s":
                    walk(value, [*path, int(name[1:])])
            return
        for kind in "uib":
            out.extend(("updated", [*path, n], v) for n, v in node.get(kind, {}).items())
        out.extend(("removed", [*path, n], None) for n in node.get("d", {}))
        for name, value in node.items():
            if name[0] == "s":
                walk(value, [*path, name[1:]])

    walk(diff, [])
    return out


def _ambiguous(parts: list[Any]) -> bool:
    """Some field name has a dot, or is a strict number below the root."""

    def strict_numeric(p: str) -> bool:
        return p.isdigit() and (p == "0" or not p.startswith("0"))

    return any(
        isinstance(p, str) and ("." in p or (i > 0 and strict_numeric(p)))
        for i, p in enumerate(parts)
    )


def _dotted(parts: list[Any]) -> str:
    return ".".join(map(str, parts))


@given(diffs())
def test_valid_diffs_parse_consistently(diff: dict[str, Any]) -> None:
    records = _reference(diff)
    ambiguous = [parts for _, parts, _ in records if _ambiguous(parts)]
    if any(isinstance(p, int) and p > 2**31 - 1 for parts in ambiguous for p in parts):
        with pytest.raises(TransformError):
            parse(diff)
        return
    got = parse(diff)
    updated = [(_dotted(parts), value) for kind, parts, value in records if kind == "updated"]
    assert canon(got["updatedFields"]) == canon(mapping_from_pairs(updated))
    assert got["removedFields"] == [_dotted(p) for kind, p, _ in records if kind == "removed"]
    assert got["truncatedArrays"] == [
        {"field": _dotted(p), "newSize": size} for kind, p, size in records if kind == "truncated"
    ]
    assert list(got["disambiguatedPaths"].items()) == [(_dotted(p), p) for p in ambiguous]
    assert canon(parse(RawBSONDocument(bson.encode(diff)))) == canon(got)
    assert canon(parse(diff, expanded=False)) == canon(
        {k: v for k, v in got.items() if k != "disambiguatedPaths"}
    )


JUNK_NAMES = st.sampled_from(["a", "l", "u", "d", "i", "b", "s", "sa", "s0", "u0", "u01", "x", ""])
JUNK = st.recursive(
    LEAVES | st.binary(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JUNK_NAMES, inner, max_size=4),
    max_leaves=12,
)
# Array diffs that get past the header more often, so their own checks are reached.
JUNK_ARRAYS = st.builds(
    lambda header, body: {"sa": {"a": header, **body}},
    st.sampled_from([True, True, True, False, 1]),
    st.dictionaries(
        st.sampled_from(["l", "u0", "s1", "u", "x1", "u01", "s-1", "u99999999999"]),
        JUNK | st.just({"a": True}) | INT32,
        max_size=3,
    ),
)


@given(st.dictionaries(JUNK_NAMES, JUNK, max_size=4) | JUNK_ARRAYS)
def test_junk_only_raises_transform_error(diff: dict[str, Any]) -> None:
    outcomes = []
    for form in (diff, RawBSONDocument(bson.encode(diff))):
        try:
            outcomes.append(canon(parse(form)))
        except TransformError as exc:
            outcomes.append(exc.code)
    assert outcomes[0] == outcomes[1]
