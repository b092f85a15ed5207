"""Fast path: shards decoded and transformed in worker processes.

Each worker runs the fast path (:func:`encode_shard`) over a contiguous block of the
shards, merges the block (:func:`merge_encoded_batches`) and sends the merged batches to
the parent as bytes -- sort keys and event BSON, through shared memory
(:mod:`batch_pipe`) -- never as dicts.  The parent merges one stream per worker with the
shards it reads itself; the blocks being contiguous, that is the order of one merge of
all the shards.
"""

from __future__ import annotations

import mmap
import multiprocessing
import select
from collections.abc import Generator, Sequence
from itertools import accumulate
from multiprocessing.connection import Connection
from typing import Any

from shardstream.errors import ShardstreamError
from shardstream.merger.raw.encoded_merge import merge_encoded_batches
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.raw_file_reader import read_raw_oplog_file
from shardstream.replay.batch_pipe import BatchReader, BatchWriter, new_ring
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.encoded_stream import EncodedBatch, encode_shard, quiet_collector
from shardstream.transform.raw.pipeline import FastShardPipeline


def shard_batches(
    name: str, path: str, options: ChangeStreamOptions
) -> Generator[EncodedBatch, None, None]:
    """One shard of a merged replay, in this process."""
    pipeline = FastShardPipeline(
        options,
        single_shard=False,
        history=FileOplogSource(name, path),
        name=name,
        source=path,  # a corrupt entry is named by its file, as the reference's reader names it
    )
    return encode_shard(
        read_raw_oplog_file(path),
        pipeline,
        check_order=True,
        start=_start_time(options),
    )


def _start_time(options: ChangeStreamOptions) -> Any:
    token = options.resume_token
    return token.cluster_time if token is not None else options.start_at_operation_time


def blocks(count: int, total: int) -> list[range]:
    """Shards 0..total-1 dealt into ``count`` contiguous blocks, the smaller (by one) first.

    Contiguous, so merging the blocks' merged streams in block order breaks ties of equal
    keys by shard order, exactly as one merge of all the shards does.
    """
    size, extra = divmod(total, count)
    sizes = [size + (i >= count - extra) for i in range(count)]
    return [range(stop - n, stop) for n, stop in zip(sizes, accumulate(sizes), strict=True)]


class WorkerPool:
    """``shards`` (name, path) read by ``processes`` processes: this one and forked workers.

    The shards are dealt in contiguous blocks (:func:`blocks`); each worker merges its block
    and sends the merged stream; this process reads the first (smallest: it also merges)
    block's shards itself.  With two cores, two processes keep both busy: a third, merging
    only, would take turns with the workers on the cores (and its transport cost more).

    The workers are forked: they inherit the rings their batches go through (see
    :mod:`batch_pipe`); a replay has no other threads whose locks a fork could copy.
    """

    def __init__(
        self, shards: Sequence[tuple[str, str]], options: ChangeStreamOptions, processes: int
    ) -> None:
        context = multiprocessing.get_context("fork")
        count = max(1, min(processes, len(shards)))
        self._options = options
        self._blocks = [[shards[i] for i in block] for block in blocks(count, len(shards))]
        self._readers: list[BatchReader] = []
        self._connections: list[Connection] = []
        self._processes: list[Any] = []
        self._streams: list[Generator[EncodedBatch, None, None]] = []
        for block in self._blocks[1:]:
            ring = new_ring()
            receive, send = context.Pipe(duplex=False)
            doorbell, ring_doorbell = context.Pipe(duplex=False)
            theirs = [*self._connections, receive, ring_doorbell]  # the parent's ends
            process = context.Process(
                target=_work, args=(block, options, send, doorbell, ring, theirs), daemon=True
            )
            process.start()
            send.close()
            doorbell.close()
            self._connections += [receive, ring_doorbell]
            self._processes.append(process)
            self._readers.append(
                BatchReader(receive.fileno(), ring_doorbell.fileno(), ring, _names(block))
            )

    def streams(self) -> list[Generator[EncodedBatch, None, None]]:
        """The streams to merge, in shard order: this process's shards, then one per worker.

        The merge reads its streams in that order too: at the start, this process encodes
        its first batches while the workers encode theirs.

        A worker's batch's events are valid until the next batch of its stream is asked for
        (they are views of the worker's ring): a consumer writes them out before it asks, as
        :func:`merge_encoded` and the replay do.
        """
        remote = [_received(reader, self._readers) for reader in self._readers]
        local = [shard_batches(name, path, self._options) for name, path in self._blocks[0]]
        self._streams = [*local, *remote]
        return list(self._streams)

    def close(self) -> None:
        """Stop the workers (early when the stream ended first, e.g. at an invalidate)."""
        for stream in self._streams:
            stream.close()  # this process's shard files, at once rather than at the next GC
        for connection in self._connections:
            connection.close()
        for process in self._processes:
            process.terminate()
            process.join()
            process.close()


def _names(block: list[tuple[str, str]]) -> str:
    return ("shard " if len(block) == 1 else "shards ") + ", ".join(repr(n) for n, _ in block)


def _received(
    reader: BatchReader, readers: list[BatchReader]
) -> Generator[EncodedBatch, None, None]:
    """``reader``'s batches; while waiting for one, read the headers every worker sent."""
    while True:
        reader.release()  # asked for the next batch: the last one is written out
        for other in readers:
            other.pump()
        while not reader.received:
            waiting = [r.fd for r in readers if not r.ended]
            for fd in select.select(waiting, [], [])[0]:
                next(r for r in readers if r.fd == fd).pump()
        batch = reader.take()
        if batch is None:
            return
        yield batch


def _work(
    block: list[tuple[str, str]],
    options: ChangeStreamOptions,
    send: Connection,
    doorbell: Connection,
    ring: mmap.mmap,
    parent_ends: list[Connection],
) -> None:
    """A worker: merge its block of shards and send the merged stream, batch by batch."""
    for connection in parent_ends:
        # Forked copies: kept open here, they would hide the parent's exit from the worker
        # (no end of file on the doorbell, no broken pipe) and leave it waiting forever.
        connection.close()
    writer = BatchWriter(send.fileno(), doorbell.fileno(), ring)
    try:
        with quiet_collector():
            for batch in merge_encoded_batches(
                [shard_batches(name, path, options) for name, path in block]
            ):
                writer.write(batch)
            writer.end()
    except BrokenPipeError:
        pass  # the parent stopped reading (the stream ended early)
    except ShardstreamError as exc:
        writer.error(exc)
    except Exception as exc:  # a bug: still tell the parent what happened
        writer.error(ShardstreamError(f"worker failed: {type(exc).__name__}: {exc}"))
    finally:
        send.close()
