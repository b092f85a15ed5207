"""Entries larger than any oplog entry are refused by every reader, by their length prefix.

server: an oplog entry is a BSONObj built by BSONObjBuilder::obj (MutableOplogEntry::toBSON
in repl::logOp), capped by BSONObj::DefaultSizeTrait at BSONObjMaxInternalSize, 16 MiB +
16 KiB: room for a 16 MiB user document and the entry's own fields, no more.
"""

from __future__ import annotations

from pathlib import Path

import bson
import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog import read_oplog_file
from shardstream.oplog.entry_size_limit import MAX_OPLOG_ENTRY_SIZE, json_entry_may_be_oversized
from shardstream.oplog.raw_file_reader import read_raw_oplog_file
from shardstream.oplog.ts_index import ts_index
from tests import factories as make
from tests.transform.replay_paths import ALL_PATHS, assert_refused, run_paths


def _entry_of_size(size: int) -> bytes:
    entry = make.insert(Timestamp(10, 2), {"_id": ObjectId("65f0000000000000000000a2"), "s": ""})
    entry["o"]["s"] = "p" * (size - len(bson.encode(entry)))
    raw = bson.encode(entry)
    assert len(raw) == size
    return raw


def _first() -> bytes:
    return bson.encode(make.insert(Timestamp(10, 1), {"_id": ObjectId("65f0000000000000000000a1")}))


def test_an_entry_at_the_limit_is_read_by_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "oplog.bson"
    path.write_bytes(_first() + _entry_of_size(MAX_OPLOG_ENTRY_SIZE))
    assert len(list(read_oplog_file(str(path)))) == 2
    assert [len(doc) for batch in read_raw_oplog_file(str(path)) for doc in batch][1] == (
        MAX_OPLOG_ENTRY_SIZE
    )
    assert ts_index(str(path)).offset_before(Timestamp(10, 2)) == 0


def test_an_entry_over_the_limit_is_refused_by_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "oplog.bson"
    first = _first()
    path.write_bytes(first + _entry_of_size(MAX_OPLOG_ENTRY_SIZE + 1))
    message = (
        f"oversized oplog entry in {path} at byte {len(first)}: expected at most "
        f"{MAX_OPLOG_ENTRY_SIZE} bytes (BSONObjMaxInternalSize), got a length of "
        f"{MAX_OPLOG_ENTRY_SIZE + 1}"
    )
    with pytest.raises(OplogError) as decoded:
        list(read_oplog_file(str(path)))
    with pytest.raises(OplogError) as raw:
        list(read_raw_oplog_file(str(path)))
    indexed = ts_index(str(path)).defect
    assert str(decoded.value) == str(raw.value) == str(indexed) == message


def test_the_length_prefix_alone_is_refused_before_the_body_is_read(tmp_path: Path) -> None:
    """A 2 GiB length prefix with nothing after it: oversized, not truncated."""
    path = tmp_path / "oplog.bson"
    path.write_bytes(_first() + (0x7FFFFFF0).to_bytes(4, "little") + b"\x00" * 8)
    with pytest.raises(OplogError, match=r"oversized oplog entry .* at byte 155"):
        list(read_oplog_file(str(path)))
    with pytest.raises(OplogError, match=r"oversized oplog entry .* at byte 155"):
        list(read_raw_oplog_file(str(path)))


def test_every_replay_path_refuses_an_oversized_entry(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    entry = bson.decode(_entry_of_size(MAX_OPLOG_ENTRY_SIZE + 1))
    first = bson.decode(_first())
    verdicts = run_paths(tmp_path, [first, entry], capsysbinary, ALL_PATHS)
    messages = assert_refused(verdicts, "oversized oplog entry in", f"{MAX_OPLOG_ENTRY_SIZE}")
    assert "line 2" in verdicts["reference"].message  # Extended JSON lines: named by line
    for path, message in zip(ALL_PATHS, messages, strict=True):
        if "reference" not in path:
            assert "at byte 155" in message


def test_only_long_json_lines_are_measured() -> None:
    assert not json_entry_may_be_oversized("{}" * 1000)
    assert json_entry_may_be_oversized("x" * (MAX_OPLOG_ENTRY_SIZE // 8 + 1))
