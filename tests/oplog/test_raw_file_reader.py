"""The fast path's file reader: whole documents whatever the chunk size, and framing errors
that name the byte where the file goes wrong."""

from __future__ import annotations

from pathlib import Path

import bson
import pytest

from shardstream.errors import OplogError
from shardstream.oplog.raw_file_reader import read_raw_oplog_file


def _documents() -> list[bytes]:
    # Sizes around and far above the chunk sizes below: a document larger than a chunk
    # is read in one more read, not a chunk at a time.
    return [
        bson.encode({"n": n, "blob": "x" * size})
        for n, size in enumerate([1, 90, 3000, 7, 50_000, 2])
    ]


@pytest.mark.parametrize("chunk_size", [16, 64, 1000, 1 << 20])
def test_every_document_comes_whole_whatever_the_chunk_size(
    chunk_size: int, tmp_path: Path
) -> None:
    path = tmp_path / "oplog.bson"
    documents = _documents()
    path.write_bytes(b"".join(documents))
    batches = list(read_raw_oplog_file(str(path), chunk_size))
    assert [doc for batch in batches for doc in batch] == documents
    assert all(batch for batch in batches)


def test_a_file_cut_inside_a_large_document_names_the_byte_and_both_sizes(tmp_path: Path) -> None:
    documents = _documents()
    path = tmp_path / "oplog.bson"
    start = sum(len(doc) for doc in documents[:4])
    path.write_bytes(b"".join(documents[:4]) + documents[4][:20_000])
    with pytest.raises(OplogError) as err:
        list(read_raw_oplog_file(str(path), 64))
    assert str(err.value) == (
        f"truncated BSON in {path} at byte {start}: expected a BSON document length of at "
        f"most 20000 bytes left, got {len(documents[4])}"
    )


def test_an_impossible_length_is_reported_without_reading_that_much(tmp_path: Path) -> None:
    path = tmp_path / "oplog.bson"
    good = _documents()[0]
    path.write_bytes(good + (0x7FFF_FFFF).to_bytes(4, "little") + b"\x00" * 100)
    # Longer than any oplog entry (entry_size_limit): refused by its prefix, as oversized.
    with pytest.raises(
        OplogError,
        match=rf"oversized oplog entry in .* at byte {len(good)}: expected at most 16793600 "
        r"bytes \(BSONObjMaxInternalSize\), got a length of 2147483647",
    ):
        list(read_raw_oplog_file(str(path), 16))
    path.write_bytes(good + (3).to_bytes(4, "little") + b"\x00" * 10)
    with pytest.raises(OplogError, match=rf"corrupt BSON .* at byte {len(good)}: expected a"):
        list(read_raw_oplog_file(str(path), 16))
