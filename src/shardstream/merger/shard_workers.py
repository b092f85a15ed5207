"""Layer 3, fast path: shards decoded and transformed in worker processes.

Each worker runs the fast path (:func:`encode_shard`) over its shards' files and
sends every batch to the parent as lists of bytes -- sort keys and event BSON --
never as dicts (pickling dicts costs more than the work it would spread).  The
parent keeps the merge in one place (:func:`merge_encoded`).  Shards are dealt to
the workers round robin; a worker with several shards alternates between them
batch by batch, so the parent sees every shard advance.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any

from shardstream import errors
from shardstream.errors import ShardstreamError
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.raw_file_reader import read_raw_oplog_file
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.encoded_stream import EncodedBatch, encode_shard, quiet_collector
from shardstream.transform.fast_path import FastShardPipeline


def shard_batches(name: str, path: str, options: ChangeStreamOptions) -> Iterator[EncodedBatch]:
    """One shard of a merged replay, in this process."""
    pipeline = FastShardPipeline(
        options, single_shard=False, history=FileOplogSource(name, path), name=name
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


class WorkerPool:
    """``workers`` processes encoding ``shards`` (name, path); one batch iterator per shard."""

    def __init__(
        self, shards: Sequence[tuple[str, str]], options: ChangeStreamOptions, workers: int
    ) -> None:
        context = multiprocessing.get_context()
        count = max(1, min(workers, len(shards)))
        self._connections: list[Connection] = []
        self._processes: list[Any] = []
        self._stash: list[deque[Any]] = [deque() for _ in shards]
        self._worker_of = [index % count for index in range(len(shards))]
        for worker in range(count):
            mine = [(i, *shard) for i, shard in enumerate(shards) if i % count == worker]
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_work, args=(mine, options, send), daemon=True)
            process.start()
            send.close()
            self._connections.append(receive)
            self._processes.append(process)

    def batches(self, index: int) -> Iterator[EncodedBatch]:
        """Shard ``index``'s batches, as its worker sends them."""
        while True:
            message = self._next_message(index)
            if message is None:
                return
            keys, events, invalidate_key = message
            yield EncodedBatch(keys, events, invalidate_key)

    def _next_message(self, index: int) -> Any:
        stash = self._stash[index]
        connection = self._connections[self._worker_of[index]]
        while not stash:
            try:
                shard, message = connection.recv()
            except EOFError:
                raise ShardstreamError(
                    f"the worker process reading shard {index} ended without finishing it"
                ) from None
            if shard < 0:
                kind, text = message
                raise getattr(errors, kind, ShardstreamError)(text)
            self._stash[shard].append(message)
        return stash.popleft()

    def close(self) -> None:
        """Stop the workers (early when the stream ended first, e.g. at an invalidate)."""
        for connection in self._connections:
            connection.close()
        for process in self._processes:
            process.terminate()
            process.join()


def _work(
    shards: list[tuple[int, str, str]], options: ChangeStreamOptions, send: Connection
) -> None:
    """A worker's loop: one batch of each of its shards in turn, until all have ended."""
    try:
        with quiet_collector():
            streams = {index: shard_batches(name, path, options) for index, name, path in shards}
            while streams:
                for index in list(streams):
                    batch = next(streams[index], None)
                    if batch is None:
                        send.send((index, None))
                        del streams[index]
                        continue
                    send.send((index, (batch.keys, batch.events, batch.invalidate_key)))
    except BrokenPipeError:
        pass  # the parent stopped reading (the stream ended early)
    except ShardstreamError as exc:
        send.send((-1, (type(exc).__name__, str(exc))))
    except Exception as exc:  # a bug: still tell the parent what happened
        send.send((-1, ("ShardstreamError", f"worker failed: {type(exc).__name__}: {exc}")))
    finally:
        send.close()
