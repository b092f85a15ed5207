"""One shard's live ``local.oplog.rs`` tailed in a child process.

The child runs an ordinary :class:`~shardstream.oplog.live.tailer.LiveOplogSource` (the
same tail loop, retry rules, history checks and majority-bounded promises) reading raw
BSON, and ships each batch to the parent as one message of the entries' bytes as the
server sent them; the parent decodes them with the oplog codec options, so the merger
sees what a thread tailer hands it. Cursor work leaves the parent's GIL, for a pipe
copy of every entry and a spawn per shard (``benchmarks/README.md`` weighs both). The
child's side, and the messages on the pipe: ``tailer_child``.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import struct
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.errors import BSONError
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost, ConfigurationError, OplogError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS, RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.live import tailer as live_source
from shardstream.oplog.live.tailer_child import TS, child_main
from shardstream.oplog.read_preference import check_read_preference
from shardstream.oplog.redaction import redact_text, redact_uri
from shardstream.oplog.source import Handout, OplogBatch

# spawn, not fork: a forked child would inherit the locks of the parent's threads as is.
_CONTEXT: Final = multiprocessing.get_context("spawn")
_read_int32: Final = struct.Struct("<i").unpack_from
_STOP_GRACE_S: Final = 5.0  # beyond await_ms, before close() terminates a child
_ERRORS: Final = {e.__name__: e for e in (OplogError, ChangeStreamHistoryLost, ConfigurationError)}
_log = logging.getLogger(__name__)


class ProcessOplogSource:
    """Tails shard ``name`` at ``shard_uri`` from ``start`` (inclusive) in a child process.

    Takes :class:`~shardstream.oplog.live.tailer.LiveOplogSource`'s arguments and keeps
    its contract; errors the child meets (even the thread tailer's constructor errors)
    come out of :meth:`next_batch` with their type and (redacted) message. As with any
    ``spawn`` child, scripts need an ``if __name__ == "__main__":`` guard.
    """

    verifies_history = True  # the child's tailer checks its oplog on every open

    def __init__(
        self,
        name: str,
        shard_uri: str,
        *,
        start: Timestamp,
        await_ms: int = 1000,
        batch_size: int = 1000,
        raw_entries: bool = False,
        **options: Any,
    ) -> None:
        """Start the child process (it connects lazily, like the thread tailer).

        Args:
            name, shard_uri, start, await_ms, batch_size: as for ``LiveOplogSource``.
            raw_entries: hand out entries as ``RawBSONDocument`` s of the bytes the child
                sent (``RawEntries``: the fast path reads the bytes), instead of decoding
                them to dicts.
            options: its other keywords (``read_preference``, ``max_queued_batches``,
                ``retry``, ``client_options``); they must pickle.

        Raises:
            ConfigurationError: ``start`` is not a Timestamp, an unknown read preference, or
                options that do not pickle.
        """
        if not isinstance(start, Timestamp):
            raise ConfigurationError(f"expected start to be a bson Timestamp, got {start!r}")
        # Checked here too, so a bad mode fails at once rather than in the child.
        check_read_preference(options.get("read_preference", "primary"))
        self._name = name
        self._where = f"shard {name!r} ({redact_uri(shard_uri)})"
        self._await_ms = await_ms
        self.raw_entries = raw_entries
        options.update(name=name, shard_uri=shard_uri, start=start)
        options.update(await_ms=await_ms, batch_size=batch_size)
        self._conn, child_conn = _CONTEXT.Pipe(duplex=True)
        args = (child_conn, options, logging.getLogger(live_source.__name__).getEffectiveLevel())
        self._process = _CONTEXT.Process(
            target=child_main, args=args, name=f"oplog-tail-{name}", daemon=True
        )
        try:
            self._process.start()
        except Exception as exc:  # pickling the options failed; say so without the URI
            self._conn.close()
            raise ConfigurationError(
                f"{self._where}: tailer='process' cannot send its options to a child "
                f"process: {type(exc).__name__}: {redact_text(str(exc))}"
            ) from None
        finally:
            child_conn.close()
        self._inbox: deque[bytes] = deque()  # messages read ahead by fetch_entry
        self._handout = Handout()
        self._closed = False
        self._exitcode: int | None = None

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    @property
    def exitcode(self) -> int | None:
        """The child's exit code once closed: 0 if it stopped by itself (None before)."""
        return self._exitcode

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        """Return up to ``max_entries`` new entries, an idle promise, or None.

        Raises:
            ChangeStreamHistoryLost: the oplog no longer reaches ``start`` or the position.
            OplogError: the tailer gave up, or its process died.
            ConfigurationError: the child could not build its tailer (bad options).
        """
        if max_entries < 1:
            raise ConfigurationError(f"expected max_entries >= 1, got {max_entries!r}")
        out = self._handout
        if not out.pending and (self._inbox or out.failure is None) and not self._closed:
            message = self._receive()
            if message is not None and message[:1] == b"B":
                try:
                    if self.raw_entries:
                        out.raws.extend(_raw_entries(message))
                    else:
                        decoded: list[dict[str, Any]] = bson.decode_all(
                            message[1:], OPLOG_CODEC_OPTIONS
                        )
                        out.entries.extend(decoded)
                except (BSONError, ValueError) as exc:  # the thread tailer's verdict
                    raise OplogError(f"corrupt BSON entry in {self._where}: {exc}") from exc
            elif message is not None:  # "P": the child's message order keeps this safe
                idle = Timestamp(*TS.unpack_from(message, 1))
                if out.promise is None or idle > out.promise:
                    out.promise = idle
                    return OplogBatch((), idle)
        return out.take(max_entries, ended=self._closed)

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """Read the entry at ``ts`` (majority-committed) through the child's tailer.

        Raises:
            OplogError: the read kept failing, or the child is gone.
        """
        if self._handout.failure is not None or self._closed:
            raise OplogError(f"{self._where}: cannot read the entry at {ts!r}: tailer stopped")
        with contextlib.suppress(OSError):  # a dead child is reported by the reads below
            self._conn.send_bytes(b"f" + TS.pack(ts.time, ts.inc))
        while True:  # bounded: the child answers, fails, or dies (EOF)
            message = self._receive(block=True, keep=True)
            if message is None:
                raise self._handout.failure or OplogError(f"{self._where}: no answer for {ts!r}")
            if message[:1] == b"F":
                return bson.decode(message[1:], OPLOG_CODEC_OPTIONS) if message[1:] else None
            if message[:1] == b"G":
                raise _rebuild(message[1:], self._where)

    def close(self) -> None:
        """Stop the child (within about one ``await_ms``) and reap it."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):  # the child may be gone already
            self._conn.send_bytes(b"s")
        self._conn.close()  # also frees a child blocked on sending into a full pipe
        self._process.join(self._await_ms / 1000 + _STOP_GRACE_S)
        if self._process.is_alive():
            _log.warning("%s: the tailer process did not stop; terminating it", self._where)
            self._process.terminate()
            self._process.join()
        self._exitcode = self._process.exitcode
        self._process.close()

    def _receive(self, *, block: bool = False, keep: bool = False) -> bytes | None:
        """The next message (with ``keep``: fetch answers only, batches kept in order)."""
        while True:  # bounded: each pass consumes one message, or returns
            if self._inbox and not keep:
                return self._inbox.popleft()
            try:
                if not self._conn.poll(None if block else 0):
                    return None
                message = self._conn.recv_bytes()
            except (EOFError, OSError):
                self._process.join(1.0)
                self._handout.failure = self._handout.failure or OplogError(
                    f"{self._where}: the tailer process exited unexpectedly "
                    f"(exit code {self._process.exitcode!r})"
                )
                return None
            tag = message[:1]
            if tag == b"L":
                _relog(message[1:])
            elif tag == b"E":
                self._handout.failure = _rebuild(message[1:], self._where)
                return None
            elif keep and tag in (b"B", b"P"):
                self._inbox.append(message)
            else:
                return message


def _raw_entries(message: bytes) -> list[bytes]:
    """The entries of a batch message, each one's bytes, cut by their length prefixes.

    (``decode_all`` into RawBSONDocuments cost ~4 us per entry, a RawBSONDocument each ~2:
    ``RawEntries`` makes one only when an entry is read.) An entry RawBSONDocument would not
    frame gets its error, as when one was made of every entry.
    """
    entries = []
    at, end = 1, len(message)
    while at < end:
        size = _read_int32(message, at)[0]
        entry = message[at : at + size]
        if size < 5 or len(entry) != size or entry[-1]:
            RawBSONDocument(entry, RAW_OPLOG_CODEC_OPTIONS)  # raises pymongo's framing error
        entries.append(entry)
        at += size
    return entries


def _rebuild(payload: bytes, where: str) -> Exception:
    kind, _, message = payload.decode("utf-8", "replace").partition("\0")
    if kind in _ERRORS:
        return _ERRORS[kind](message)
    return OplogError(f"{where}: the tailer process failed: {kind}: {message}")


def _relog(payload: bytes) -> None:
    level, logger, message = payload.decode("utf-8", "replace").split("\0", 2)
    logging.getLogger(logger).log(int(level), "%s (tailer process)", message)
