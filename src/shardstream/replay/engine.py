"""``shardstream replay --output-format bson``: change events as concatenated BSON.

Picks the fastest path that gives the reference output: the raw-BSON fast path
when the input is BSON and the options allow it (shards merged with their events
still encoded, in worker processes when asked), otherwise the reference pipeline
with each event encoded as it comes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from functools import partial
from typing import BinaryIO

from shardstream.merger import MergedStream
from shardstream.merger.raw.encoded_merge import merge_encoded
from shardstream.oplog import InputFormat, read_oplog_file
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.raw_file_reader import read_raw_oplog_file
from shardstream.oplog.ts_order import in_ts_order
from shardstream.replay.batch_pipe import write_all
from shardstream.replay.shard_workers import WorkerPool, shard_batches
from shardstream.transform import ChangeEvent, ChangeStreamOptions, transform_oplog
from shardstream.transform.event_bson import event_bson
from shardstream.transform.raw.encoded_stream import encode_shard, quiet_collector
from shardstream.transform.raw.extended_json import bson_to_json
from shardstream.transform.raw.pipeline import FastShardPipeline, fast_path_applies

REPLAY_BATCH = 1000


def uses_fast_path(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
) -> bool:
    """Whether a BSON replay of ``shards`` runs the fast path (BSON files, default options)."""
    return fast_path_applies(options) and all(
        (input_format or InputFormat.for_path(path)) is InputFormat.BSON for _, path in shards
    )


def write_bson_events(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
    out: BinaryIO,
    *,
    workers: int = 0,
) -> None:
    """Write the stream of ``shards`` (name, path) to ``out`` as concatenated BSON events."""
    _write_batches(_event_batches(shards, input_format, options, workers), out, lambda batch: batch)


def write_json_events(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
    out: BinaryIO,
    *,
    workers: int = 0,
    relaxed: bool = False,
) -> None:
    """Write the stream as Extended JSON lines (canonical unless ``relaxed``) to ``out``.

    The same events as :func:`write_bson_events`, each written from its BSON bytes by
    :func:`~shardstream.transform.raw.extended_json.bson_to_json`: the text json_util writes
    for the decoded event (a repeated field name, as in ``updatedFields``, kept twice).
    """

    def lines(batch: list[bytes]) -> list[bytes]:
        text = "\n".join([bson_to_json(event, relaxed=relaxed) for event in batch])
        return [text.encode("ascii"), b"\n"] if batch else []

    _write_batches(_event_batches(shards, input_format, options, workers), out, lines)


def _write_batches(
    batches: Iterator[list[bytes]], out: BinaryIO, render: Callable[[list[bytes]], list[bytes]]
) -> None:
    """Write each batch of BSON events, as ``render`` turns it into the output's pieces."""
    write = _batch_writer(out)
    with quiet_collector():
        for batch in batches:
            write(render(batch))
    out.flush()


def _batch_writer(out: BinaryIO) -> Callable[[list[bytes]], None]:
    """How a batch of events goes out: straight from the events to the file when it has one.

    ``os.writev`` hands the kernel the events where they lie, rather than joining them into
    one more copy of the output first (the joined copy is also fresh memory each batch).
    """
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # e.g. an in-memory stream

        def write_joined(batch: list[bytes]) -> None:
            out.write(b"".join(batch))

        return write_joined
    out.flush()  # anything already in ``out``'s buffer goes first
    return partial(write_all, fd)


def _event_batches(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
    workers: int,
) -> Iterator[list[bytes]]:
    if not uses_fast_path(shards, input_format, options):
        yield from reference_batches(shards, input_format, options)
        return
    if len(shards) == 1:
        path = shards[0][1]
        pipeline = FastShardPipeline(options, name=_source_name(path))
        # A replica set's oplog, like a shard's, must increase in ts (see oplog.ts_order).
        for batch in encode_shard(read_raw_oplog_file(path), pipeline, check_order=True):
            yield batch.events
        return
    merged_options = options.with_options(merged_by_router=True)
    if workers <= 1:
        streams = [shard_batches(name, path, merged_options) for name, path in shards]
        try:
            yield from merge_encoded(streams)
        finally:
            for stream in streams:
                stream.close()  # the shard files, at once (an error's traceback holds them)
        return
    pool = WorkerPool(shards, merged_options, workers)
    try:
        yield from merge_encoded(pool.streams())
    finally:
        pool.close()


def reference_event_batches(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
) -> Iterator[list[ChangeEvent]]:
    """The reference path's events, in batches: the stream replay writes in both formats.

    One oplog is a replica set: mongod's pipeline, no router stages. Several are merged as
    mongos merges them.
    """
    if len(shards) == 1:
        # closing(): an invalidate ends the stream early; the file must still close at once.
        path = shards[0][1]
        where = f"shard {_source_name(path)!r}"  # as the fast path words it
        with closing(in_ts_order(read_oplog_file(path, input_format), where)) as entries:
            batch: list[ChangeEvent] = []
            for event in transform_oplog(entries, options):
                batch.append(event)
                if len(batch) >= REPLAY_BATCH:
                    yield batch
                    batch = []
            yield batch
        return
    sources = {name: FileOplogSource(name, path, input_format) for name, path in shards}
    merged = MergedStream(sources, options)
    try:
        while not merged.exhausted:
            yield merged.next_batch(REPLAY_BATCH)[0]
    finally:
        merged.close()


def reference_batches(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
) -> Iterator[list[bytes]]:
    """The reference path's events as BSON, in batches."""
    for events in reference_event_batches(shards, input_format, options):
        yield [event_bson(event) for event in events]  # the bytes the size check kept


def _source_name(path: str) -> str:
    """How a replica set's oplog file is named in messages."""
    return path if path != "-" else "<stdin>"
