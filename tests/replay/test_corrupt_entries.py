"""A corrupt entry gets one verdict on every path of ``replay`` (issue 25, item 1).

Each corruption kind is planted in each entry shape the fast path writes from bytes (mongod's
CRUD layout: insert, update, delete; another field order; an op inside a transaction's
``applyOps``). Every path -- BSON output, Extended JSON output, two shards merged in one
process and with ``--workers 2``, and the reference path alone (``--show-expanded-events``
turns the fast path off) -- must exit 1 with the same one line, naming the file, the entry's
byte offset and its ``ts``. The message text after "corrupt BSON entry in <file> at byte <n>:"
is pymongo's and is not asserted (only that it is the same everywhere).

Depth: server: ``BSONDepth::kDefaultMaxAllowableDepth`` (200), as ``validateBSON`` counts levels
below a document's top (``ValidateBuffer::_pushFrame``): deeper entries are refused everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.max_key import MaxKey
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.cli.main import main
from shardstream.oplog.bson_depth import MAX_NESTING
from shardstream.replay.engine import reference_batches
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.pipeline import FastShardPipeline
from tests import factories as make

KEY = ObjectId("0123456789abcdef01234567")
BAD_TS = Timestamp(1700000000, 5)


def _payload() -> dict[str, Any]:
    """A document holding each thing a corruption below damages; MaxKey last (a bare name)."""
    return {"s": "hello", "kk": 1, "n": {"z": {"y": 1}}, "b": True, "zz": MaxKey()}


def _nested(levels: int) -> dict[str, Any]:
    document: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        document = {"d": document}
    return document


def _insert(ts: Timestamp, document: dict[str, Any]) -> dict[str, Any]:
    return make.insert(ts, {"_id": KEY, **document}, ns="shop.orders")


def _update(ts: Timestamp, document: dict[str, Any]) -> dict[str, Any]:
    return make.update(ts, KEY, {"u": document}, ns="shop.orders")


def _any_layout(ts: Timestamp, document: dict[str, Any]) -> dict[str, Any]:
    entry = _insert(ts, document)
    return {"ts": entry.pop("ts"), **entry}  # ts first: not mongod's order


def _in_transaction(ts: Timestamp, document: dict[str, Any]) -> dict[str, Any]:
    op = make.inner(_insert(ts, document))
    other = make.inner(make.insert(ts, {"_id": ObjectId(), "x": 1}, ns="shop.orders"))
    return make.apply_ops(ts, [other, op])


def _delete(ts: Timestamp, document: dict[str, Any]) -> dict[str, Any]:
    # A delete's o is its key: what is damaged is ns (a string) and o itself.
    del document
    return make.delete(ts, KEY, ns="shop.orders")


SHAPES: dict[str, Callable[[Timestamp, dict[str, Any]], dict[str, Any]]] = {
    "insert": _insert,
    "update": _update,
    "delete": _delete,
    "any-layout": _any_layout,
    "transaction": _in_transaction,
}


def _replace(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def damage(raw: bytes) -> bytes:
        assert raw.count(old) == 1, old
        return raw.replace(old, new)

    return damage


def _longer_nested(raw: bytes) -> bytes:
    """The sub-document n's length, one more than its bytes."""
    at = raw.index(b"\x03n\x00") + 3
    size = int.from_bytes(raw[at : at + 4], "little")
    return raw[:at] + (size + 1).to_bytes(4, "little") + raw[at + 4 :]


def _longer_key_document(raw: bytes) -> bytes:
    """A delete's o = {_id}: its length, one more than its bytes."""
    at = raw.index(b"\x03o\x00") + 3
    return raw[:at] + b"\x17" + raw[at + 1 :]


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "bad UTF-8 in a string": _replace(b"hello", b"\xffello"),
    "bad UTF-8 in a key": _replace(b"\x10kk\x00", b"\x10k\xff\x00"),
    "broken nested length": _longer_nested,
    "zeroed type byte": _replace(b"\x10kk\x00", b"\x00kk\x00"),
    "bool byte 2": _replace(b"\x08b\x00\x01", b"\x08b\x00\x02"),
    "truncated C string": _replace(b"\x7fzz\x00\x00", b"\x7fzzz\x00"),
}
DELETE_CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "bad UTF-8 in a string": _replace(b"shop.orders\x00", b"shop.\xffrders\x00"),
    "bad UTF-8 in a key": _replace(b"\x07_id\x00", b"\x07_\xffd\x00"),
    "broken nested length": _longer_key_document,
    "zeroed type byte": _replace(b"\x07_id\x00", b"\x00_id\x00"),
    "truncated C string": _replace(b"shop.orders\x00", b"shop.ordersx"),
}
CASES = [
    (shape, kind)
    for shape in SHAPES
    for kind in ([*(DELETE_CORRUPTIONS if shape == "delete" else CORRUPTIONS), "too deep"])
    if not (shape == "delete" and kind == "too deep")
]


def _entries(shape: str, kind: str, *, seen: bool) -> tuple[list[bytes], int]:
    """Good entries around the damaged one; and the damaged one's byte offset.

    ``seen``: a good entry of the same shape and namespace comes first, so the fast path
    meets the damaged one with its template (and head) cached, not on a full layout match.
    """
    build = SHAPES[shape]
    before = [_insert(Timestamp(1700000000, i), {"x": i}) for i in range(1, 4)]
    if seen:
        before[-1] = build(Timestamp(1700000000, 3), _payload())
    after = [_insert(Timestamp(1700000000, i), {"x": i}) for i in range(6, 8)]
    for entry in before[: 2 if seen else 3] + after:
        entry["o"]["_id"] = ObjectId()
        entry["o2"]["_id"] = entry["o"]["_id"]
    if kind == "too deep":
        # The document nests MAX_NESTING - 1 levels below o: the entry, one more than allowed.
        # (o sits 1 level below the entry's top, 4 in applyOps; an update's value 3, in diff.u)
        depth_of_o = 4 if shape == "transaction" else (3 if shape == "update" else 1)
        damaged = bson.encode(build(BAD_TS, {"deep": _nested(MAX_NESTING - depth_of_o)}))
    else:
        good = bson.encode(build(BAD_TS, _payload()))
        damage = (DELETE_CORRUPTIONS if shape == "delete" else CORRUPTIONS)[kind]
        damaged = damage(good)
        assert damaged != good
    docs = [bson.encode(entry) for entry in before] + [damaged]
    docs += [bson.encode(entry) for entry in after]
    return docs, sum(map(len, docs[: len(before)]))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("seen", [False, True], ids=["first-of-its-shape", "shape-seen"])
@pytest.mark.parametrize(("shape", "kind"), CASES, ids=[f"{s}-{k}" for s, k in CASES])
def test_every_path_refuses_a_corrupt_entry_with_one_line(
    shape: str, kind: str, seen: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, offset = _entries(shape, kind, seen=seen)
    path = tmp_path / "bad.bson"
    path.write_bytes(b"".join(docs))
    other = tmp_path / "other.bson"
    other.write_bytes(bson.encode(_insert(Timestamp(1700000000, 4), {"_id": ObjectId(), "y": 1})))
    shards = ["--shard", f"a={path}", "--shard", f"b={other}"]
    runs = {
        "bson": ["replay", str(path), "--output-format", "bson"],
        "json": ["replay", str(path)],
        "two shards, bson": ["replay", *shards, "--output-format", "bson"],
        "two shards, --workers 2": ["replay", *shards, "--output-format", "bson", "--workers", "2"],
        "two shards, json": ["replay", *shards],
        "reference": ["replay", str(path), "--show-expanded-events"],
        "reference, two shards": ["replay", *shards, "--show-expanded-events"],
    }
    errors = {}
    for name, argv in runs.items():
        code, err = _run(argv, capsys)
        assert code == 1, (name, err)
        errors[name] = err
    expected = errors["reference"]
    assert expected.startswith(
        f"shardstream replay: error: corrupt BSON entry in {path} at byte {offset}: "
    )
    assert expected.count("\n") == 1
    assert "Traceback" not in expected
    if kind == "too deep":
        assert f"expected at most {MAX_NESTING} levels of nested documents" in expected
        assert f"got {MAX_NESTING + 1}" in expected
    if (shape, kind) == ("delete", "broken nested length"):
        # o's own length is what is broken, and ts comes after it: not read
        assert "(entry ts" not in expected
    else:
        assert expected.endswith(f"(entry ts {BAD_TS!r})\n")
    assert errors == dict.fromkeys(runs, expected)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_shapes_before_damage_are_written_by_the_fast_path(shape: str) -> None:
    # Else the test above would prove nothing about the fast path's check.
    entries = [SHAPES[shape](BAD_TS, _payload())]
    entries += (
        [SHAPES[shape](BAD_TS, {"deep": _nested(MAX_NESTING - 5)})] if shape != "delete" else []
    )
    for entry in entries:
        pipeline = FastShardPipeline(ChangeStreamOptions())
        keys: list[bytes] = []
        events: list[bytes] = []
        pipeline.process_batch([bson.encode(entry)], keys, events)
        assert pipeline.fast_entries == 1
        assert events


def test_an_entry_at_the_depth_limit_replays_on_every_path(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # Exactly MAX_NESTING levels below the entry's top: accepted (one more is refused above).
    entry = _insert(BAD_TS, {"deep": _nested(MAX_NESTING - 2)})
    path = tmp_path / "deep.bson"
    path.write_bytes(bson.encode(entry))
    outputs = {}
    for flags in ([], ["--output-format", "bson"], ["--show-expanded-events"]):
        code = main(["replay", str(path), *flags])
        out, err = capsysbinary.readouterr()
        assert code == 0, err
        outputs[len(flags)] = out
    # The fast path's event (default options) is the reference's for the same options.
    batches = reference_batches([("", str(path))], None, ChangeStreamOptions())
    assert outputs[2] == b"".join(next(batches))
