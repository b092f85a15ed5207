"""Replay with worker processes: contiguous blocks, the shared-memory transport, errors.

Every replay here is compared with the one-process replay (itself tested against the
reference pipeline), byte for byte, on files: the output then goes out with ``writev``.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp

from shardstream.errors import OplogError, ShardstreamError, TransformError
from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.replay import shard_workers
from shardstream.replay.batch_pipe import BatchReader, BatchWriter, new_ring
from shardstream.replay.engine import write_bson_events
from shardstream.replay.shard_workers import blocks
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.encoded_stream import EncodedBatch
from shardstream.transform.raw.event_writer import encode_event_document
from tests import factories as make
from tests.transform.raw_corpus import generate_entries

T = [Timestamp(1700000000, i) for i in range(60)]
Shards = list[tuple[str, str]]


def _files(tmp_path: Path, oplogs: Mapping[str, Sequence[Mapping[str, Any]]]) -> Shards:
    shards = []
    for name, entries in oplogs.items():
        path = tmp_path / f"{name}.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        shards.append((name, str(path)))
    return shards


def _replay(tmp_path: Path, shards: Shards, options: ChangeStreamOptions, workers: int) -> bytes:
    out = tmp_path / f"out{workers}.bson"
    with out.open("wb") as file:
        write_bson_events(shards, None, options, file, workers=workers)
    assert multiprocessing.active_children() == []  # the pool is gone, early end or not
    return out.read_bytes()


def _reference(shards: Shards, options: ChangeStreamOptions) -> bytes:
    merged = MergedStream({name: FileOplogSource(name, path) for name, path in shards}, options)
    events: list[bytes] = []
    while not merged.exhausted:
        events += [encode_event_document(e.document) for e in merged.next_batch(100)[0]]
    merged.close()
    return b"".join(events)


@pytest.mark.parametrize(("count", "total"), [(1, 1), (2, 4), (2, 5), (3, 4), (4, 4), (3, 8)])
def test_blocks_are_contiguous_smaller_first_and_cover_every_shard(count: int, total: int) -> None:
    dealt = blocks(count, total)
    assert [i for block in dealt for i in block] == list(range(total))
    sizes = [len(block) for block in dealt]
    assert sizes == sorted(sizes)
    assert sizes[0] - sizes[-1] <= 1


@pytest.mark.parametrize("workers", [2, 3, 4, 5])
@pytest.mark.parametrize("seed", [1, 2])
def test_random_shards_replay_as_in_one_process(workers: int, seed: int, tmp_path: Path) -> None:
    oplogs = {f"s{i}": list(generate_entries(400 + 50 * i, seed * 10 + i)) for i in range(4)}
    shards = _files(tmp_path, oplogs)
    options = ChangeStreamOptions()
    expected = _replay(tmp_path, shards, options, 0)
    assert len(expected) > 100_000
    assert _replay(tmp_path, shards, options, workers) == expected


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_equal_keys_across_shards_keep_the_shard_order(workers: int, tmp_path: Path) -> None:
    # The same drop on every shard: four events with one token, told apart by shard only.
    oplogs = {
        name: [
            make.insert(T[1 + n], {"_id": n, "shard": name}),
            make.command(T[5], "db", {"drop": "coll"}),
            make.insert(T[9 + n], {"_id": 10 + n, "shard": name}, ns="db.other"),
        ]
        for n, name in enumerate("abcd")
    }
    shards = _files(tmp_path, oplogs)
    options = ChangeStreamOptions(db="db")
    expected = _reference(shards, options)
    assert _replay(tmp_path, shards, options, 0) == expected
    assert _replay(tmp_path, shards, options, workers) == expected


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("dropped", ["b", "c", "bc", "abcd"])
def test_the_first_invalidate_ends_the_stream_wherever_its_shard_is(
    workers: int, dropped: str, tmp_path: Path
) -> None:
    oplogs: dict[str, list[dict[str, Any]]] = {}
    for n, name in enumerate("abcd"):
        # Inserts at T[0..19] and T[22..41], shards a/c on even times, b/d on odd ones.
        times = [2 * i + n % 2 + (2 if i >= 10 else 0) for i in range(20)]
        entries = [make.insert(T[t], {"_id": f"{name}{t}"}) for t in times]
        if name in dropped:  # the drop between them: a and c at one time, b and d at another
            entries.insert(10, make.command(T[20 + n % 2], "db", {"drop": "coll"}))
        oplogs[name] = entries
    shards = _files(tmp_path, oplogs)
    options = ChangeStreamOptions(db="db", coll="coll")
    expected = _reference(shards, options)
    assert bson.decode_all(expected)[-1]["operationType"] == "invalidate"
    assert _replay(tmp_path, shards, options, 0) == expected
    assert _replay(tmp_path, shards, options, workers) == expected


@pytest.mark.parametrize("bad", ["a", "d"])  # read by this process; read by a worker
def test_a_bad_shard_fails_with_its_name(bad: str, tmp_path: Path) -> None:
    oplogs = {name: list(generate_entries(60, n)) for n, name in enumerate("abcd")}
    oplogs[bad][10], oplogs[bad][20] = oplogs[bad][20], oplogs[bad][10]
    shards = _files(tmp_path, oplogs)
    with pytest.raises(OplogError, match=f"shard '{bad}': expected ts to increase"):
        _replay(tmp_path, shards, ChangeStreamOptions(), 2)


def test_a_worker_that_dies_fails_the_replay_naming_its_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = _files(tmp_path, {name: list(generate_entries(60, 1)) for name in "abcd"})
    real = shard_workers.shard_batches

    def dying(name: str, path: str, options: ChangeStreamOptions) -> Iterator[EncodedBatch]:
        if name == "c":  # in a forked worker: the patch is inherited
            os._exit(3)
        return real(name, path, options)

    monkeypatch.setattr(shard_workers, "shard_batches", dying)
    with pytest.raises(ShardstreamError, match="reading shards 'c', 'd' ended early"):
        _replay(tmp_path, shards, ChangeStreamOptions(), 2)


def test_a_bug_in_a_worker_arrives_as_a_shardstream_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = _files(tmp_path, {name: list(generate_entries(60, 1)) for name in "abc"})
    real = shard_workers.shard_batches

    def broken(name: str, path: str, options: ChangeStreamOptions) -> Iterator[EncodedBatch]:
        if name == "c":  # a worker's shard ('a' is read by this process)
            raise RuntimeError("boom")
        return real(name, path, options)

    monkeypatch.setattr(shard_workers, "shard_batches", broken)
    with pytest.raises(ShardstreamError, match="worker failed: RuntimeError: boom"):
        _replay(tmp_path, shards, ChangeStreamOptions(), 3)


def test_without_a_file_the_events_are_joined_and_written(tmp_path: Path) -> None:
    shards = _files(tmp_path, {name: list(generate_entries(80, n)) for n, name in enumerate("ab")})
    out = io.BytesIO()
    write_bson_events(shards, None, ChangeStreamOptions(), out, workers=2)
    assert out.getvalue() == _replay(tmp_path, shards, ChangeStreamOptions(), 0)


def _batches(rng_seed: int) -> list[EncodedBatch]:
    """Batches of every size: empty, small, wrapping the ring, larger than a quarter of it."""
    batches = []
    for n, size in enumerate([0, 1, 3, 40, 7, 200, 2, 90, 5, 31, 64, 1, 150, 9]):
        keys = [b"%08X" % (rng_seed * 10_000 + n * 1000 + i) for i in range(size)]
        events = [b"event %d.%d " % (n, i) + b"x" * (i % 13) for i in range(size)]
        batches.append(EncodedBatch(keys, events))
    batches[-1].invalidate_key = batches[-1].keys[-1]
    return batches


def test_the_ring_carries_batches_in_order_whatever_their_size() -> None:
    ring = new_ring(1024)  # tiny: the writer waits for space, wraps, and uses the pipe
    data_read, data_write = os.pipe()
    bell_read, bell_write = os.pipe()
    sent = _batches(1)

    def send() -> None:
        writer = BatchWriter(data_write, bell_read, ring)
        for batch in sent:
            writer.write(batch)
        writer.error(OplogError("shard 'x': bad"))

    thread = threading.Thread(target=send)
    thread.start()
    reader = BatchReader(data_read, bell_write, ring, "shard 'x'")
    got: list[tuple[list[bytes], list[bytes], bytes | None]] = []

    def receive() -> None:
        for batch in shard_workers._received(reader, [reader]):
            # Copied before the next is asked for: the ring space is given back then.
            got.append((batch.keys, [bytes(e) for e in batch.events], batch.invalidate_key))

    with pytest.raises(OplogError, match="shard 'x': bad"):
        receive()
    thread.join()
    for fd in (data_read, data_write, bell_read, bell_write):
        os.close(fd)
    assert got == [(b.keys, b.events, b.invalidate_key) for b in sent]


def test_a_reader_whose_writer_closes_without_an_end_fails() -> None:
    data_read, data_write = os.pipe()
    bell_read, bell_write = os.pipe()
    os.close(data_write)
    reader = BatchReader(data_read, bell_write, new_ring(1024), "shards 'a', 'b'")
    with pytest.raises(ShardstreamError, match="reading shards 'a', 'b' ended early"):
        list(shard_workers._received(reader, [reader]))
    for fd in (data_read, bell_read, bell_write):
        os.close(fd)


def test_a_workers_transform_error_keeps_its_ts_and_code(tmp_path: Path) -> None:
    """The same exception as in one process: class, message and attributes."""
    oplogs = {name: list(generate_entries(40, n)) for n, name in enumerate("abcd")}
    # After the shard's last entry (an entry out of ts order would be refused as that first).
    after = Timestamp(oplogs["d"][-1]["ts"].time + 1, 1)
    v1_update = make.update(after, 1, {}) | {"o": {"$set": {"x": 1}}}  # $v:1: refused on 8.2
    oplogs["d"].append(v1_update)  # read by the worker
    shards = _files(tmp_path, oplogs)
    errors = []
    for workers in (0, 2):
        with pytest.raises(TransformError) as caught:
            _replay(tmp_path, shards, ChangeStreamOptions(), workers)
        errors.append((str(caught.value), caught.value.ts, caught.value.code))
    assert errors[0] == errors[1]
    assert errors[1][1] == after
    assert errors[1][2] is not None


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failed_replay_closes_its_files_at_once(workers: int, tmp_path: Path) -> None:
    oplogs = {name: list(generate_entries(60, n)) for n, name in enumerate("abcd")}
    oplogs["a"][10], oplogs["a"][20] = oplogs["a"][20], oplogs["a"][10]  # this process's shard
    shards = _files(tmp_path, oplogs)
    before = _open_files()
    with pytest.raises(OplogError) as caught:
        _replay(tmp_path, shards, ChangeStreamOptions(), workers)
    # While the error (and its traceback, which references the replay's frames) is still
    # held, as a caller's handler holds it: no pipe or shard file is left open.
    assert caught.value.__traceback__ is not None
    assert _open_files() == before


def _open_files() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())
