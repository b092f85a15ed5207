"""Extended JSON oplog files: bad text is an OplogError naming the file and line, never a
UnicodeDecodeError or RecursionError; JSON as deep as the server's BSON can be still reads
(issue 25, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bson import json_util
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog import InputFormat, read_oplog_file
from shardstream.resume_token.json_input import MAX_JSON_DEPTH

ENTRY = json_util.dumps({"ts": Timestamp(1700000000, 1), "op": "n", "ns": "", "o": {"msg": "é"}})


def _with_document_of_depth(depth: int) -> str:
    # The entry is the outermost object; its field "x" holds the other depth - 1 levels.
    inner = '{"a":' * (depth - 2) + "{}" + "}" * (depth - 2)
    return ENTRY[:-1] + f', "x": {inner}}}'


def _read(path: Path) -> list[object]:
    return list(read_oplog_file(str(path), InputFormat.EJSON))


def test_utf8_text_reads(tmp_path: Path) -> None:
    path = tmp_path / "oplog.jsonl"
    path.write_text(f"{ENTRY}\n\n{ENTRY}\n", encoding="utf-8")
    entries = _read(path)
    assert len(entries) == 2
    assert entries[0]["o"] == {"msg": "é"}  # type: ignore[index]


def test_a_byte_that_is_not_utf8_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "oplog.jsonl"
    path.write_bytes(f"{ENTRY}\n".encode() + b'{"op": "\xc3("}\n')
    with pytest.raises(OplogError) as raised:
        _read(path)
    assert str(raised.value) == (
        f"expected UTF-8 text in {path} line 2, got the byte 0xc3 at column 9"
    )


def test_json_as_deep_as_the_server_allows_reads(tmp_path: Path) -> None:
    # server: BSONDepth::getMaxAllowableDepth (bson_depth.h): validateBSON accepts 200
    # levels below the top-level document; Extended JSON adds at most 3 per value.
    path = tmp_path / "oplog.jsonl"
    path.write_text(_with_document_of_depth(MAX_JSON_DEPTH) + "\n")
    assert len(_read(path)) == 1


def test_json_deeper_than_the_limit_is_refused_naming_line_and_limit(tmp_path: Path) -> None:
    path = tmp_path / "oplog.jsonl"
    path.write_text(f"{ENTRY}\n" + _with_document_of_depth(3000) + "\n")
    with pytest.raises(OplogError) as raised:
        _read(path)
    message = str(raised.value)
    assert f"{path} line 2" in message
    assert f"at most {MAX_JSON_DEPTH} levels deep, got 3000 levels" in message


@pytest.mark.parametrize(
    "line",
    [
        '{"ts": {"$timestamp": {"t": 1, "i": 1}}, "o": {"$numberDecimal": "1e99999999"}}',
        '{"ts": {"$timestamp": {"t": 1, "i": 1}}, "o": {"_id": {"$oid": "zz"}}}',
        '{"ts": {"$timestamp": {"t": 1, "i": 1}}, "wall": {"$date": 1e400}}',
        '{"ts": {"$timestamp": {"t": true, "$binary": 1}}}',
        '{"ts": ',
    ],
)
def test_what_extended_json_parsing_raises_is_an_oplog_error(tmp_path: Path, line: str) -> None:
    path = tmp_path / "oplog.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(OplogError, match=f"corrupt Extended JSON entry in {path} line 1: "):
        _read(path)


def test_a_line_longer_than_any_entry_is_refused_before_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real bound is 16x the largest entry (file_reader.MAX_EJSON_LINE); a small one
    # shows the reader stops at it rather than reading a line without end (/dev/zero).
    monkeypatch.setattr("shardstream.oplog.file_reader.MAX_EJSON_LINE", len(ENTRY) + 1)
    path = tmp_path / "oplog.jsonl"
    path.write_text(f"{ENTRY}\n" + " " * 10_000 + f"{ENTRY}\n")
    with pytest.raises(OplogError) as raised:
        _read(path)
    assert str(raised.value) == (
        f"oversized Extended JSON entry in {path} line 2: expected a line of at most "
        f"{len(ENTRY) + 1} bytes, got more"
    )
