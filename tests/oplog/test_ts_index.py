"""The sparse ts index of an oplog.bson file, and a file source opened near a time."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost, OplogError
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.ts_index import SAMPLE_BYTES, STRIDE, ts_index
from shardstream.spark.source.positioned_source import PositionedSource


def _entries(count: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    entries = []
    time, inc = 1_700_000_000, 1
    for number in range(count):
        if rng.random() < 0.4:
            time, inc = time + rng.randint(1, 3), 1
        else:
            inc += 1
        # Sizes vary, so offsets are not a multiple of anything.
        entries.append(
            {
                "op": "n",
                "ns": "",
                "o": {"pad": "x" * rng.randint(0, 300), "n": number},
                "ts": Timestamp(time, inc),
            }
        )
    return entries


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    return path


def _read_all(source: Any) -> list[Mapping[str, Any]]:
    read: list[Mapping[str, Any]] = []
    while True:
        batch = source.next_batch(97)
        read += list(batch.entries)
        if batch.exhausted:
            return read


def test_a_seek_lands_just_before_the_time_and_loses_nothing(tmp_path: Path) -> None:
    entries = _entries(STRIDE * 9 + 17)
    path = _write(tmp_path / "s.bson", entries)
    index = ts_index(str(path))
    assert len(index.offsets) == 10  # every STRIDE-th entry, the first included
    assert index.last == (entries[-1]["ts"].time << 32) | entries[-1]["ts"].inc
    rng = random.Random(1)
    for start in [entries[0]["ts"], entries[-1]["ts"], *(e["ts"] for e in rng.sample(entries, 25))]:
        offset = index.offset_before(start)
        tail = list(bson.decode_all(path.read_bytes()[offset:]))
        wanted = [e for e in entries if e["ts"] >= start]
        assert tail[len(tail) - len(wanted) :] == wanted  # every entry from start on
        skipped = len(tail) - len(wanted)
        assert skipped <= STRIDE  # at most a stride of earlier ones
        if start != entries[0]["ts"]:
            assert skipped >= 1  # the entry just before start is seen (history check)


def test_large_entries_are_sampled_by_bytes_too(tmp_path: Path) -> None:
    entries = _entries(STRIDE * 3)
    sizes = [30, 400_000, 900_000, 5, 2_500_000, 70_000] * (len(entries) // 6)
    for entry, size in zip(entries, sizes, strict=True):
        entry["o"]["pad"] = "y" * size
    path = _write(tmp_path / "big.bson", entries)
    index = ts_index(str(path))
    starts = [0]
    for entry in entries:
        starts.append(starts[-1] + len(bson.encode(entry)))
    assert index.ordinals[0] == 0
    for at, ordinal in enumerate(index.ordinals):
        assert index.offsets[at] == starts[ordinal]
        assert index.times[at] == (entries[ordinal]["ts"].time << 32) | entries[ordinal]["ts"].inc
    for at in range(1, len(index.ordinals)):
        entries_between = index.ordinals[at] - index.ordinals[at - 1]
        assert 1 <= entries_between <= STRIDE
        # A sample is taken at the first entry SAMPLE_BYTES or more past the one before.
        before_last = starts[index.ordinals[at] - 1] - index.offsets[at - 1]
        assert entries_between == 1 or before_last < SAMPLE_BYTES
    assert len(index.ordinals) > len(entries) // STRIDE + 1  # the bytes added samples


@pytest.mark.parametrize("raw", [False, True], ids=["decoded", "raw"])
def test_a_source_opened_near_a_time_reads_what_a_whole_read_reads(
    raw: bool, tmp_path: Path
) -> None:
    entries = _entries(STRIDE * 5)
    path = str(_write(tmp_path / "s.bson", entries))
    for start in (entries[0]["ts"], entries[STRIDE * 3 + 5]["ts"], entries[-1]["ts"]):
        near = PositionedSource(FileOplogSource("s", path, raw_entries=raw, near=start), start)
        whole = PositionedSource(FileOplogSource("s", path, raw_entries=raw), start)
        assert [dict(e) for e in _read_all(near)] == [dict(e) for e in _read_all(whole)]
    # Before the file's first entry: still the server's history-lost error.
    early = Timestamp(entries[0]["ts"].time - 1, 1)
    with pytest.raises(ChangeStreamHistoryLost):
        _read_all(PositionedSource(FileOplogSource("s", path, near=early), early))


def test_a_changed_file_is_indexed_anew(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.bson", _entries(STRIDE * 2))
    first = ts_index(str(path))
    assert ts_index(str(path)) is first  # cached
    _write(path, _entries(STRIDE * 4, seed=2))
    os.utime(path, ns=(1, 1))  # a different mtime, whatever the clock's resolution
    assert len(ts_index(str(path)).offsets) == 4


def test_a_corrupt_file_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.bson"
    good = b"".join(bson.encode(e) for e in _entries(3))
    path.write_bytes(good + b"\x02\x00\x00\x00")
    index = ts_index(str(path))
    # Kept, not raised: a reader meets it in its place, after any earlier entry's error.
    assert isinstance(index.defect, OplogError)
    assert f"at byte {len(good)}: expected a document length" in str(index.defect)
    assert index.offsets == (0,)  # the entries before it are indexed
    no_ts = tmp_path / "t.bson"
    no_ts.write_bytes(bson.encode({"op": "n"}))
    assert "expected an oplog entry with a Timestamp ts" in str(ts_index(str(no_ts)).defect)


def test_an_out_of_order_file_is_found_where_its_index_is_built(tmp_path: Path) -> None:
    entries = _entries(STRIDE * 3)
    entries[STRIDE * 2]["ts"] = Timestamp(1, 1)
    path = str(_write(tmp_path / "s.bson", entries))
    defect = ts_index(path).defect
    assert defect is not None
    assert re.search(r"expected ts to increase in .*s\.bson: the entry at byte", str(defect))
    with pytest.raises(OplogError, match="expected ts to increase"):
        _read_all(FileOplogSource("s", path, near=entries[-1]["ts"]))


def test_a_last_entry_before_the_samples_is_a_defect(tmp_path: Path) -> None:
    """Planners end a window just after the file's last ts: it must be the newest."""
    entries = _entries(STRIDE + 2)
    entries[-1]["ts"] = Timestamp(1, 1)
    defect = ts_index(str(_write(tmp_path / "s.bson", entries))).defect
    assert defect is not None
    assert "expected ts to increase" in str(defect)


@pytest.mark.parametrize(
    "damage",
    [
        "none",
        "large entries",
        "bad length",
        "cut at the end",
        "out of order",
        "empty",
        "unusual sample",
        "corrupt sample",
        "past the clock",
    ],
)
def test_the_compiled_framing_builds_the_python_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    from shardstream.oplog import ts_index as module

    if module._index_run is None:
        pytest.fail("shardstream.oplog._framing is not built (setup.py builds it)")
    entries = _entries(20_000, seed=7)  # ~3.5 MB: several of the builder's 1 MiB reads
    if damage == "large entries":
        for number in (5, 6, 700, 9_000):
            entries[number]["o"]["pad"] = "y" * (SAMPLE_BYTES // 2 + number)
        entries[12_345]["o"]["pad"] = "z" * (SAMPLE_BYTES * 5 // 2)  # over one read
    if damage == "out of order":
        entries[STRIDE * 400]["ts"] = Timestamp(1, 1)  # a sampled entry
    if damage == "unusual sample":  # C leaves a non-ASCII name to Python, which reads it
        entries[STRIDE * 100]["ns"] = "café.orders"
    if damage == "past the clock":
        entries[STRIDE * 300]["ts"] = Timestamp(2**31, 1)
    if damage == "corrupt sample":
        entries[STRIDE * 200]["ns"] = "zz.zz"
    data = b"".join(bson.encode(entry) for entry in entries)
    if damage == "corrupt sample":  # not UTF-8: pymongo's reading fails there
        data = data.replace(b"zz.zz", b"\xff\xfe.zz")
    if damage == "bad length":
        at = len(b"".join(bson.encode(entry) for entry in entries[:15_001]))
        data = data[:at] + b"\xff\xff\xff\x7f" + data[at + 4 :]
    if damage == "cut at the end":
        data = data[:-7]
    if damage == "empty":
        data = b""
    (tmp_path / "c.bson").write_bytes(data)
    (tmp_path / "p.bson").write_bytes(data)
    compiled = ts_index(str(tmp_path / "c.bson"))
    monkeypatch.setattr(module, "_index_run", None)
    python = ts_index(str(tmp_path / "p.bson"))
    assert (compiled.times, compiled.offsets, compiled.ordinals, compiled.last) == (
        python.times,
        python.offsets,
        python.ordinals,
        python.last,
    )
    described = [
        None if index.defect is None else str(index.defect).replace(name, "F")
        for index, name in ((compiled, "c.bson"), (python, "p.bson"))
    ]
    assert described[0] == described[1]
    assert (described[0] is None) == (
        damage in ("none", "large entries", "empty", "unusual sample")
    )
