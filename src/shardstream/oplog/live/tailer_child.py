"""The child process of a :class:`~shardstream.oplog.live.process_tailer.ProcessOplogSource`:
an ordinary :class:`~shardstream.oplog.live.tailer.LiveOplogSource` reading raw BSON, its
batches, idle promises, fetched entries, errors and log records sent to the parent.

Messages are ``tag + payload`` byte strings on a duplex pipe: the child sends batches
(``B``: the entries' bytes as the server sent them, back to back), idle promises (``P``),
errors (``E``: the error's class name and its redacted text), fetched entries (``F``/``G``)
and log records (``L``); the parent sends fetch requests (``f``) and stop (``s``).
Timestamps travel as :data:`TS`.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any, Final

from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.live import tailer as live_source
from shardstream.oplog.redaction import redact_text

TS: Final = struct.Struct(">II")  # a Timestamp's time and increment, as the pipe carries it
CHILD_POLL_S: Final = 0.002  # how long an idle child waits for a request before re-polling


class _PipeLogHandler(logging.Handler):
    """Forwards the child tailer's log records to the parent's loggers."""

    def __init__(self, send: Any) -> None:
        super().__init__()
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"{record.levelno}\0{record.name}\0{record.getMessage()}"
            self._send(b"L" + text.encode())
        except Exception:  # a log record must never kill the tailer
            self.handleError(record)


def child_main(conn: Connection, options: dict[str, Any], log_level: int) -> None:
    """The child: tail with a LiveOplogSource and forward everything to ``conn``."""
    send_lock = threading.Lock()  # log records come from the tailer's thread too

    def send(message: bytes) -> None:
        with send_lock:
            conn.send_bytes(message)

    logger = logging.getLogger("shardstream")
    logger.setLevel(log_level)
    logger.addHandler(_PipeLogHandler(send))
    logger.propagate = False
    source: live_source.LiveOplogSource | None = None
    try:
        source = _raw_source(options)
        _serve(source, conn, send, options["batch_size"])
    except (EOFError, OSError):
        pass  # the parent closed the pipe: stop
    except Exception as exc:
        text = f"{type(exc).__name__}\0{redact_text(str(exc))}"  # tailer errors are redacted
        with contextlib.suppress(OSError):
            send(b"E" + text.encode())
    finally:
        if source is not None:
            source.close()
        conn.close()


def _raw_source(options: dict[str, Any]) -> live_source.LiveOplogSource:
    # Raw documents: batches leave as the server's bytes, decoded once, in the parent.
    return live_source.LiveOplogSource(**options, codec_options=RAW_OPLOG_CODEC_OPTIONS)


def _serve(source: live_source.LiveOplogSource, conn: Connection, send: Any, size: int) -> None:
    while True:  # bounded: ends on stop, on EOF (OSError/EOFError), or on an error
        batch = source.next_batch(size)
        if batch is not None and batch.entries:
            send(b"B" + b"".join(_raw(entry) for entry in batch.entries))
        elif batch is not None and batch.promise is not None:
            send(b"P" + TS.pack(batch.promise.time, batch.promise.inc))
        if conn.poll(0 if batch is not None else CHILD_POLL_S):
            request = conn.recv_bytes()
            if request[:1] != b"f":
                return  # "s": stop
            try:
                entry = source.fetch_entry(Timestamp(*TS.unpack_from(request, 1)))
                send(b"F" + (b"" if entry is None else _raw(entry)))
            except OplogError as exc:
                send(b"G" + f"{type(exc).__name__}\0{exc}".encode())


def _raw(entry: Mapping[str, Any]) -> bytes:
    if not isinstance(entry, RawBSONDocument):
        raise OplogError(f"internal: the child tailer produced {type(entry).__name__}, not raw")
    return bytes(entry.raw)
