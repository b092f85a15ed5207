"""One stream's reader for ``shardstream bench --duration`` (live tail), in a thread or a process.

:func:`tail` opens one stream (mongos's native change stream, or ``shardstream.watch``) at
a given cluster time, says so on its pipe, and records, for every insert into the bench
namespace, the document's key and insert time (``sent``), the event's ``wallTime`` and
BSON size, and ``time.time()`` when the event left the stream: one clock for every
process of the machine, so a reader in its own process (its own GIL) times the same way
as one in a thread.  Once the run's end arrives on the pipe (the cluster time when the
writes stopped, the write window and how many documents it holds) it reads on until it
has seen them all or is past that cluster time, or until nothing came for the idle
timeout, then sends its samples; the statistics are made by :mod:`shardstream.bench.latency`.

Pipe protocol (reader to parent): ``("opened", None)`` or ``("error", message)``, then
``("done", samples)`` or ``("error", message)``; parent to reader: ``("end", Fence)`` or
``("stop", None)``.  Messages are redacted: the URI's password never leaves.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import bson
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.bench.common import error_text
from shardstream.oplog.redaction import redacted_repr
from shardstream.resume_token import decode_token_document
from shardstream.stream import watch


@dataclass(frozen=True)
class TailSpec:
    """What one reader opens (picklable: it crosses to a spawned process)."""

    kind: str  # "shardstream" or "native"
    uri: str
    start: Timestamp
    namespace: str  # "db.coll": the bench's inserts; every other event is only counted
    tailer: str = "thread"
    max_await_ms: int = 500
    monitor_shards: bool = True  # shardstream's config.shards monitor (watch's default)
    idle_timeout_s: float = 30.0

    def __repr__(self) -> str:
        return redacted_repr(self)  # the generated repr would print the URI's password


def tail(spec: TailSpec, conn: Connection) -> None:
    """Open ``spec``'s stream, read it to the fence, send the samples (see the module)."""
    try:
        opener: Any = _Native if spec.kind == "native" else _ours
        with opener(spec) as stream:
            conn.send(("opened", None))
            samples = _read(stream, conn, spec)
            ours = spec.kind == "shardstream"  # (a test's stand-in native stream is ours too)
            samples["shard_positions"] = stream.shard_positions() if ours else None
    except Exception as exc:  # any failure is the report's, not a silent dead reader
        conn.send(("error", error_text(exc, spec.uri)))
        return
    conn.send(("done", samples))


def _ours(spec: TailSpec) -> Any:
    return watch(
        spec.uri,
        start_at_operation_time=spec.start,
        max_await_time_ms=spec.max_await_ms,
        tailer=spec.tailer,
        monitor_shards=spec.monitor_shards,
    )


class _Native:
    """The native stream, closing its own client with it (a reader process has no other)."""

    def __init__(self, spec: TailSpec) -> None:
        self._client: MongoClient[Any] = MongoClient(spec.uri)
        try:
            self._stream = self._client.watch(
                start_at_operation_time=spec.start, max_await_time_ms=spec.max_await_ms
            )
        except BaseException:
            self._client.close()
            raise

    def __enter__(self) -> Any:
        return self._stream

    def __exit__(self, *_exc: object) -> None:
        self._stream.close()
        self._client.close()


def _read(stream: Any, conn: Connection, spec: TailSpec) -> dict[str, Any]:
    db, _, coll = spec.namespace.partition(".")
    ns = {"db": db, "coll": coll}
    samples: dict[str, list[Any]] = {key: [] for key in ("key", "sent", "out", "wall", "size")}
    other, fence, stopped = 0, None, "stop"
    in_window: set[str] = set()  # distinct keys: a duplicate must not stand for a missed one
    progress = time.monotonic()
    while True:
        if fence is None and conn.poll():
            kind, fence = conn.recv()
            if kind == "stop":
                break
            in_window = {
                key
                for key, sent in zip(samples["key"], samples["sent"], strict=True)
                if fence.t_open <= sent < fence.t_end
            }
            progress = time.monotonic()
        if fence is not None and len(in_window) >= fence.expected:
            stopped = "all seen"
            break
        event = stream.try_next()
        out = time.time()  # first: what follows is the bench's own work
        if event is None:
            if fence is None:
                continue
            token = stream.resume_token
            if token is not None and decode_token_document(token).cluster_time > fence.cluster_time:
                stopped = "caught up"
                break
            if time.monotonic() - progress > spec.idle_timeout_s:
                stopped = "idle timeout"
                break
            continue
        progress = time.monotonic()
        if fence is not None and event["clusterTime"] > fence.cluster_time:
            stopped = "caught up"
            break
        document = event.get("fullDocument")
        if event.get("ns") != ns or not isinstance(document, Mapping) or "sent" not in document:
            other += 1
            continue
        sent, key = float(document["sent"]), str(document.get("_id"))
        samples["key"].append(key)
        samples["sent"].append(sent)
        samples["out"].append(out)
        samples["wall"].append(_epoch(event.get("wallTime")))
        samples["size"].append(len(bson.encode(event)))
        if fence is not None and fence.t_open <= sent < fence.t_end:
            in_window.add(key)
    return {"samples": samples, "other_events": other, "stopped": stopped}


def _epoch(wall: Any) -> float | None:
    # pymongo's default is a naive datetime in UTC; ours are UTC-aware; before 6.0 none.
    if not isinstance(wall, datetime.datetime):
        return None
    return (wall if wall.tzinfo else wall.replace(tzinfo=datetime.UTC)).timestamp()
