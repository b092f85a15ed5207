"""One shard's live ``local.oplog.rs`` as an :class:`OplogSource`.

A background thread tails the oplog with a tailable, awaitData cursor at read concern
``majority`` (only entries that can never roll back are delivered) and hands batches to
the merger through a bounded queue, so a slow merge pauses the reader instead of
growing memory. Failures of the cursor are absorbed by reopening it right after the last
delivered ``ts``; lost history and exhausted retries surface from :meth:`next_batch`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from bson.codec_options import CodecOptions
from bson.errors import BSONError
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import CursorType
from pymongo.collection import Collection
from pymongo.cursor import Cursor
from pymongo.errors import PyMongoError
from pymongo.read_concern import ReadConcern

from shardstream.errors import ConfigurationError, OplogError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.oplog.live.faults import RetryPolicy, Verdict, classify, retry_cause
from shardstream.oplog.live.majority import Majority, check_history, idle_promise, read_majority
from shardstream.oplog.live.reader_handoff import ReaderHandoff
from shardstream.oplog.live.tail_client import tailing_client
from shardstream.oplog.redaction import redact_text, redact_uri
from shardstream.oplog.source import OplogBatch

_log = logging.getLogger(__name__)
Entry = Mapping[str, Any]


class LiveOplogSource:
    """Tails shard ``name`` at ``shard_uri`` from ``start`` (inclusive).

    Example::

        source = LiveOplogSource("shard01", uri, start=cluster.cluster_time)
        batch = source.next_batch(1000)   # None: nothing new yet
        source.close()

    The promise of each batch is the last entry's ``ts``; while the shard is idle it is
    the shard's majority commit point (see :meth:`_idle_promise_from`).
    """

    # The tailer checks its oplog still reaches the start on every open (see _open).
    verifies_history = True

    def __init__(
        self,
        name: str,
        shard_uri: str,
        *,
        start: Timestamp,
        read_preference: str = "primary",
        await_ms: int = 1000,
        batch_size: int = 1000,
        max_queued_batches: int = 4,
        retry: RetryPolicy | None = None,
        client_options: Mapping[str, Any] | None = None,
        codec_options: CodecOptions[Any] = OPLOG_CODEC_OPTIONS,
    ) -> None:
        """Create the client (lazily connecting) and start the reader thread.

        Args:
            name: The shard's name, used in every message.
            shard_uri: The shard's URI (may hold credentials; only shown redacted).
            start: The first ``ts`` wanted; the oplog must still reach back to it.
            read_preference: A read-preference mode name (``primary``, ``secondary``...).
            await_ms: How long one getMore waits for new entries (mongos uses 1000).
            batch_size: The cursor's batch size and the largest queued batch.
            max_queued_batches: Batches read ahead before the reader pauses.
            retry: The reopen budget for failing cursors.
            codec_options: How entries are decoded (e.g. ``RAW_OPLOG_CODEC_OPTIONS`` to pass
                the server's bytes on untouched: :attr:`raw_entries`).
            client_options: Extra ``MongoClient`` keyword arguments (``socketTimeoutMS``:
                :func:`~shardstream.oplog.live.tail_client.tailing_client`).

        Raises:
            ConfigurationError: a bad argument (read preference included) or URI.
        """
        if await_ms <= 0 or batch_size <= 0 or max_queued_batches <= 0:
            raise ConfigurationError(
                f"expected positive await_ms, batch_size and max_queued_batches, got "
                f"{await_ms!r}, {batch_size!r}, {max_queued_batches!r}"
            )
        if not isinstance(start, Timestamp):
            raise ConfigurationError(f"expected start to be a bson Timestamp, got {start!r}")
        self._name = name
        self._where = f"shard {name!r} ({redact_uri(shard_uri)})"
        # Whether entries are RawBSONDocuments, which the merge reads through the fast path.
        self.raw_entries = codec_options.document_class is RawBSONDocument
        self._client, self._secret = tailing_client(
            shard_uri,
            self._where,
            await_ms=await_ms,
            read_preference=read_preference,
            client_options=client_options,
        )
        local = self._client.get_database("local", codec_options=codec_options)
        self._oplog: Collection[Any] = local.get_collection(
            "oplog.rs", read_concern=ReadConcern("majority")
        )
        self._oplog_local: Collection[Any] = local.get_collection("oplog.rs")
        self._start = start
        self._await_ms = await_ms
        self._batch_size = batch_size
        self._retry = retry or RetryPolicy()
        # Reader-thread state.
        self._last_ts: Timestamp | None = None  # last ts put on the queue
        self._failures = 0
        self._stop = threading.Event()
        self._handoff = ReaderHandoff(max_queued_batches, self._stop)
        self._thread = threading.Thread(target=self._run, name=f"oplog-tail-{name}", daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    # -- consumer side -----------------------------------------------------------------

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        """Return up to ``max_entries`` new entries, an idle promise, or None.

        Raises:
            ChangeStreamHistoryLost: the oplog no longer reaches ``start`` or the position.
            OplogError: the reader gave up (retries exhausted, or a non-retryable error).
        """
        if max_entries < 1:
            raise ConfigurationError(f"expected max_entries >= 1, got {max_entries!r}")
        return self._handoff.next_batch(max_entries)

    def fetch_entry(self, ts: Timestamp) -> Entry | None:
        """Read the entry at ``ts`` (majority-committed), retrying transient failures.

        Raises:
            OplogError: the read kept failing.
        """
        attempt = 0
        while True:  # bounded: each failure counts against the retry budget
            try:
                entry: Entry | None = self._oplog.find_one({"ts": {"$gte": ts, "$lte": ts}})
                return entry
            except PyMongoError as exc:
                attempt += 1
                if classify(exc) is not Verdict.RETRY or attempt > self._retry.max_retries:
                    raise OplogError(
                        f"{self._where}: cannot read the entry at {ts!r}: {self._redact(exc)}"
                    ) from exc
                self._stop.wait(self._retry.delay(attempt))

    def close(self) -> None:
        """Stop the reader (within about one ``await_ms``) and close the client."""
        self._stop.set()
        self._thread.join(self._await_ms / 1000 + 2)
        self._client.close()
        self._thread.join()  # a getMore stuck past the first join ends at socketTimeoutMS

    # -- reader thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._tail()
        except BaseException as exc:  # handed to next_batch; a reader must not die silently
            if not self._stop.is_set():
                self._handoff.put(exc)

    def _tail(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
                cause = "the cursor died without an error"  # tailable 43/136 end quietly
            except BSONError as exc:
                # The driver decoded a batch holding an entry that is not BSON: the same
                # verdict as the fast path's check and the file readers (an OplogError),
                # never a retry (the entry would come back as it is).
                raise OplogError(
                    f"corrupt BSON entry in {self._where} after ts {self._last_ts!r}: "
                    f"{self._redact(exc)}"
                ) from exc
            except PyMongoError as exc:
                if self._stop.is_set():
                    return
                cause = retry_cause(exc, self._where, self._last_ts, self._start, self._redact(exc))
            if self._stop.is_set():
                return
            self._failures += 1
            if self._failures > self._retry.max_retries:
                raise OplogError(
                    f"{self._where}: gave up after {self._retry.max_retries} retries "
                    f"reopening the oplog after {self._last_ts!r}; last cause: {cause}"
                )
            delay = self._retry.delay(self._failures)
            _log.warning(
                "%s: %s; reopening after ts %r in %.2fs (retry %d/%d)",
                self._where, cause, self._last_ts, delay, self._failures,
                self._retry.max_retries,
            )  # fmt: skip
            self._stop.wait(delay)

    def _follow(self) -> None:
        """Tail one cursor until it dies; return on a quiet death, raise on an error."""
        majority = self._read_majority()  # read before the first read: see _idle_promise_from
        bound = self._start if self._last_ts is None else self._last_ts
        query = {"ts": {"$gte": bound} if self._last_ts is None else {"$gt": bound}}
        cursor: Cursor[Any] = self._oplog.find(
            query, cursor_type=CursorType.TAILABLE_AWAIT, batch_size=self._batch_size
        ).max_await_time_ms(self._await_ms)
        with cursor:
            checked = False
            consumed = 0
            batch: list[Entry] = []
            while not self._stop.is_set():
                doc: Entry | None = next(cursor, None)
                if not checked:
                    check_history(
                        self._oplog_local,
                        bound,
                        resuming=self._last_ts is not None,
                        start=self._start,
                        where=self._where,
                    )
                    checked = True
                if doc is None:  # an empty awaitData batch, or a dead cursor
                    if not cursor.alive:
                        return
                    self._failures = 0
                    self._idle_promise_from(majority, cursor)
                    majority = self._read_majority()
                    continue
                self._failures = 0
                # A raw entry's ts is read from its bytes by the fast path, which checks the
                # order of every entry; here only each batch's last is (decoding all of a raw
                # entry's top level to read one field cost ~8 us per entry).
                batch.append(doc if self.raw_entries else self._checked_entry(doc, batch))
                consumed += 1
                # Flush when the driver's buffer is empty, i.e. before the next getMore.
                if consumed == cursor.retrieved or len(batch) >= self._batch_size:
                    self._enqueue(batch)
                    batch = []

    def _checked_entry(self, doc: Entry, batch: list[Entry]) -> Entry:
        ts = doc.get("ts")
        previous = batch[-1]["ts"] if batch else self._last_ts
        if not isinstance(ts, Timestamp) or (previous is not None and ts <= previous):
            raise OplogError(f"{self._where}: expected a ts above {previous!r}, got {ts!r:.60}")
        return doc

    def _read_majority(self) -> Majority | None:
        def log(exc: PyMongoError) -> None:
            _log.debug("%s: hello failed: %s", self._where, self._redact(exc))

        return read_majority(self._client, self._oplog, log)

    def _idle_promise_from(self, majority: Majority | None, cursor: Cursor[Any]) -> None:
        """Publish ``majority`` as the idle promise if :func:`idle_promise` allows it."""
        # _last_ts is the reader's own: reading it outside the hand-off's lock is safe.
        self._handoff.publish_idle(idle_promise(majority, cursor.address, self._last_ts))

    def _enqueue(self, batch: list[Entry]) -> None:
        if self.raw_entries:
            self._checked_entry(batch[-1], [])
        if self._handoff.put(tuple(batch)):
            self._last_ts = batch[-1]["ts"]

    def _redact(self, exc: BaseException) -> str:
        return redact_text(str(exc), self._secret)
