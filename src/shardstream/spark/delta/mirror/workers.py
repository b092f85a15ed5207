"""Sink: a large batch's mirror preparation split by document over worker processes.

While the sink runs, Spark's executors wait for the batch to commit and the driver's one
Python thread prepares the mirror (split, keyed read, stored documents parsed, diffs applied:
most of a batch's time, ``benchmarks/README.md``).  Documents are independent of each other
except through a drop, rename or dropDatabase, so a batch without those is cut by a hash of
each event's document ``_id`` into one part per worker process, each part in token order.
Every part is prepared as the driver would prepare a batch
(:func:`~shardstream.spark.delta.mirror.prepare.prepare_events`, with its own keyed read),
and the parts' MERGE sources, whose keys are disjoint, are joined into the one the driver
writes in its single MERGE: the tables are those the driver alone writes
(``tests/spark/test_mirror_workers.py``).

The driver prepares a batch itself when it is small (the processes' round trip would cost
more than it saves), holds a namespace event or a split event's fragment, or when a part
fails: a bad event's error is then raised by the driver, the first in token order, as
without workers.  A pool that broke (a worker killed) or that cannot run a part is shut
down, logged and not used again.  Workers are started by ``spawn`` (the driver holds Spark's
JVM gateway and threads) on the first batch that uses them; like every ``spawn`` start, a
driver script must keep its work under ``if __name__ == "__main__":``, or each worker would
run it again on import.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
import zlib
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from shardstream.errors import ShardstreamError
from shardstream.spark.delta.mirror.plain import applies_whole, document_ids
from shardstream.spark.delta.mirror.prepare import MERGE_KEY_ORDER, PreparedBatch, prepare_events

# Below this many events a batch is prepared in the driver: a part's round trip (Arrow IPC
# both ways, its own table load and keyed read) costs tens of milliseconds.
DEFAULT_MIN_EVENTS: Final = 4_000
_PARENT_POLL_SECONDS: Final = 0.5
_log = logging.getLogger(__name__)


class MirrorWorkers:
    """Worker processes preparing the mirror at ``path``, a part of a batch each.

    Args:
        path: the mirror table.
        processes: worker processes (2 or more).
        strict: as :class:`~shardstream.spark.delta.mirror.table.DeltaMirror`'s.
        snapshot_read_end: as :func:`~shardstream.spark.delta.mirror.state.apply_batch`'s.
        min_events: batches smaller than this are left to the driver (default
            :data:`DEFAULT_MIN_EVENTS`, read when the workers are made).
        record_versions: the prepared batches carry their versions (the history's).
    """

    def __init__(
        self,
        path: Path,
        processes: int,
        *,
        strict: bool,
        snapshot_read_end: tuple[int, int] | None,
        min_events: int | None = None,
        record_versions: bool = False,
    ) -> None:
        if processes < 2:
            raise ValueError(f"expected 2 or more mirror worker processes, got {processes}")
        self.path = path
        self.processes = processes
        self.strict = strict
        self.snapshot_read_end = snapshot_read_end
        self.min_events = DEFAULT_MIN_EVENTS if min_events is None else min_events
        self.record_versions = record_versions
        self._pool: ProcessPoolExecutor | None = None
        self._stopped = False

    def prepare(self, fresh: pa.Table) -> PreparedBatch | None:
        """``fresh`` (events above the watermark, token order) prepared in parts; None when
        the driver must prepare it itself (see the module's docstring)."""
        if self._stopped or fresh.num_rows < self.min_events:
            return None
        parts = split_by_document(fresh, self.processes)
        if parts is None:
            return None
        path, strict, read_end = str(self.path), self.strict, self.snapshot_read_end
        record = self.record_versions
        futures: list[Future[PreparedBatch]] = []
        try:
            pool = self._started()
            futures += [
                pool.submit(_prepare_part, path, p, strict, read_end, record) for p in parts
            ]
            prepared = [future.result() for future in futures]
        except ShardstreamError:
            # A bad event: the driver prepares the batch and raises the first one itself.
            for future in futures:
                future.cancel()
            return None
        except Exception as exc:  # the pool broke (a worker killed) or cannot run parts
            _log.warning("mirror workers stopped, the driver prepares batches alone: %r", exc)
            self.close()
            return None
        versions = [part.versions for part in prepared if part.versions is not None]
        return PreparedBatch(
            events=fresh.num_rows,
            rows_read=sum(part.rows_read for part in prepared),
            source=pa.concat_tables([part.source for part in prepared]).sort_by(MERGE_KEY_ORDER),
            unknown_updates=sum(part.unknown_updates for part in prepared),
            parts=len(parts),
            versions=pa.concat_tables(versions).sort_by("_id") if versions else None,
        )

    def close(self) -> None:
        """Stop the worker processes for good (later batches are prepared by the driver)."""
        self._stopped = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with_parent,
                initargs=(os.getpid(),),
            )
        return self._pool


def split_by_document(events: pa.Table, parts: int) -> list[pa.Table] | None:
    """``events`` cut into ``parts`` by a hash of each event's document ``_id``, each in
    token order; events that touch no document go to the first part.  None when the batch
    must be applied whole: a namespace event, a fragment, or a row the driver must refuse.
    """
    if applies_whole(events):
        return None
    try:
        ids = document_ids(events)
    except ShardstreamError:
        return None
    which = [0 if i is None else zlib.crc32(i.encode()) % parts for i in ids]
    part_of = pa.array(which, pa.int32())
    return [events.filter(pc.equal(part_of, part)) for part in range(parts)]


def _exit_with_parent(parent: int) -> None:
    """In a worker: exit when the driver is gone (a SIGKILLed ingest must leave no process
    behind; the pool's queue never reports EOF to a worker, which holds both its ends), and
    leave Ctrl-C to the driver, which stops the workers through :meth:`MirrorWorkers.close`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="shardstream-parent-watch", daemon=True).start()


def _prepare_part(
    path: str,
    events: pa.Table,
    strict: bool,
    snapshot_read_end: tuple[int, int] | None,
    record_versions: bool,
) -> PreparedBatch:
    """In a worker: one part prepared (tables travel pickled, as Arrow buffers)."""
    return prepare_events(
        Path(path),
        events,
        strict=strict,
        snapshot_read_end=snapshot_read_end,
        record_versions=record_versions,
    )
