"""``shardstream bench --uri``: a native change stream and shardstream over one time window.

Like the server's ``change_streams_listen_throughput`` workload: the caller takes a
cluster time, pre-fills the cluster, then runs the bench from that time.  Both
streams replay the same range of the shards' oplogs, one after the other: mongos's own
``$changeStream`` (``MongoClient(uri).watch(start_at_operation_time=...)``) and
:func:`shardstream.watch`.  Each reads until ``events`` events or until it has caught up
with the cluster time taken when the run starts (the window is ``[start, that time)``),
and reports events/s, BSON bytes/s, latency (the wall time an event leaves the stream
minus its ``wallTime``: on a replay that is mostly the pre-fill's age, hence the separate
catch-up time) and, for shardstream, each shard's position at the end.  A native stream
that cannot be opened (no privileges; the emulator's mongos has no ``aggregate``) is
reported as unavailable with the server's message; credentials never reach the output.
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import bson
from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError

from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.merger.change_stream import watch
from shardstream.oplog.redaction import redact_text
from shardstream.resume_token import decode_token_document

DEFAULT_EVENTS = 100_000
DEFAULT_IDLE_TIMEOUT_S = 30.0
_AWAIT_MS = 500


class _Stream(Protocol):
    """What both pymongo's and shardstream's change streams offer."""

    def try_next(self) -> Mapping[str, Any] | None: ...

    @property
    def resume_token(self) -> Mapping[str, Any] | None: ...


def password_of(uri: str) -> str:
    """The password in ``uri``'s userinfo, or "" (so it can be hidden wherever it appears).

    >>> password_of("mongodb://app:s3cret@h1,h2/?replicaSet=rs0")
    's3cret'
    >>> password_of("mongodb://h1/")
    ''
    """
    rest = uri.partition("://")[2]
    userinfo, at, _ = rest.rpartition("@")
    return userinfo.partition(":")[2] if at else ""


def error_text(exc: BaseException, uri: str) -> str:
    """A one-line, redacted message for ``exc`` (a server error: its code and errmsg)."""
    if isinstance(exc, OperationFailure):
        details = exc.details or {}
        text = f"{details.get('codeName', 'error')} ({exc.code}): {details.get('errmsg', exc)}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return redact_text(text, password_of(uri))


def cluster_time(client: MongoClient[Any]) -> Timestamp:
    """The cluster's time now, as mongos reports it (``operationTime`` of a ``hello``)."""
    reply = client.admin.command("hello")
    now = reply.get("operationTime") or reply.get("$clusterTime", {}).get("clusterTime")
    if not isinstance(now, Timestamp):
        raise ShardstreamError(f"expected mongos to report operationTime, got {now!r:.80}")
    return now


def resolve_start(now: Timestamp, at: Timestamp | None, since_seconds: float | None) -> Timestamp:
    """The window's start: ``at``, or ``since_seconds`` before ``now`` (one is required)."""
    if (at is None) == (since_seconds is None):
        got = "both" if at is not None else "neither"
        raise ConfigurationError(
            "expected one of --start-at-operation-time T,I (a cluster time taken before the "
            f"pre-fill) or --since-seconds S with --uri, got {got}"
        )
    if since_seconds is None:
        return at  # type: ignore[return-value]  # exactly one of the two is given
    if since_seconds <= 0:
        raise ConfigurationError(f"expected --since-seconds S with S > 0, got {since_seconds}")
    return Timestamp(max(1, now.time - int(since_seconds)), 0)


def read_window(
    stream: _Stream,
    opened: float,
    end: Timestamp,
    events: int,
    idle_timeout_s: float,
) -> dict[str, Any]:
    """Read ``stream`` until ``events`` events, an event at or past ``end``, or a high-water
    mark at or past ``end`` (caught up); time it, excluding the BSON sizing of events.

    Returns the measured figures and, under ``"ids"``, the events' ``_id._data`` in order.
    """
    ids: list[str] = []
    latencies: list[float] = []
    size, sizing_s, first_s = 0, 0.0, None
    caught_up, progress = False, time.monotonic()
    while len(ids) < events:
        event = stream.try_next()
        now = time.time()
        if event is None:
            token = stream.resume_token
            if token is not None and decode_token_document(token).cluster_time >= end:
                caught_up = True
                break
            if time.monotonic() - progress > idle_timeout_s:
                break
            continue
        progress = time.monotonic()
        if event["clusterTime"] >= end:
            caught_up = True
            break
        first_s = first_s if first_s is not None else time.perf_counter() - opened
        latencies.append(now - _epoch(event["wallTime"]))
        ids.append(event["_id"]["_data"])
        began = time.perf_counter()
        size += len(bson.encode(event))
        sizing_s += time.perf_counter() - began
    seconds = max(time.perf_counter() - opened - sizing_s, 1e-9)
    return {
        "available": True,
        "events": len(ids),
        "bytes": size,
        "seconds": seconds,
        "events_per_s": len(ids) / seconds,
        "bytes_per_s": size / seconds,
        "first_event_s": first_s,
        "caught_up": caught_up,
        "catch_up_s": seconds if caught_up else None,
        "latency_s": _percentiles(latencies),
        "ids": ids,
    }


def _epoch(wall: Any) -> float:
    if not isinstance(wall, datetime.datetime):
        return float("nan")
    if wall.tzinfo is None:  # pymongo's default: naive datetimes in UTC
        wall = wall.replace(tzinfo=datetime.UTC)
    return float(wall.timestamp())


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
        "max": ordered[-1],
    }


def _timed(
    opener: Callable[[], AbstractContextManager[Any]],
    end: Timestamp,
    events: int,
    idle_timeout_s: float,
    after: Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    opened = time.perf_counter()
    with opener() as stream:
        result = read_window(stream, opened, end, events, idle_timeout_s)
        if after is not None:
            result.update(after(stream))
    return result


def measure_live(
    uri: str,
    *,
    start_at: Timestamp | None = None,
    since_seconds: float | None = None,
    events: int = DEFAULT_EVENTS,
    tailer: str = "thread",
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
) -> dict[str, Any]:
    """Read the window with shardstream, then with the native stream; the JSON report.

    Raises:
        ConfigurationError: bad arguments.
        ShardstreamError: shardstream's own stream failed (the native one failing is
            reported, not raised); messages are redacted.
    """
    if events < 1:
        raise ConfigurationError(f"expected --events N with N >= 1, got {events}")
    if tailer not in ("thread", "process"):
        raise ConfigurationError(f"expected --tailer thread or process, got {tailer!r}")
    client: MongoClient[Any] = MongoClient(uri)
    try:
        try:
            end = cluster_time(client)
        except PyMongoError as exc:
            raise ShardstreamError(f"cannot read the cluster time: {error_text(exc, uri)}") from exc
        start = resolve_start(end, start_at, since_seconds)

        def ours_opener() -> Any:
            return watch(
                uri, start_at_operation_time=start, max_await_time_ms=_AWAIT_MS, tailer=tailer
            )

        def positions(stream: Any) -> dict[str, Any]:
            return {"shard_positions": _positions(stream.shard_positions(), cluster_time(client))}

        try:
            ours = _timed(ours_opener, end, events, idle_timeout_s, positions)
        except (ShardstreamError, PyMongoError) as exc:
            raise ShardstreamError(f"shardstream stream failed: {error_text(exc, uri)}") from exc
        try:
            native = _timed(
                lambda: client.watch(start_at_operation_time=start, max_await_time_ms=_AWAIT_MS),
                end,
                events,
                idle_timeout_s,
            )
            native["shard_positions"] = None
        except PyMongoError as exc:
            native = {"available": False, "error": error_text(exc, uri)}
    finally:
        client.close()
    return _report(uri, start, end, events, tailer, ours, native)


def _positions(positions: Mapping[str, Timestamp | None], now: Timestamp) -> dict[str, Any]:
    return {
        name: {
            "position": None if ts is None else [ts.time, ts.inc],
            "lag_s": None if ts is None else max(0, now.time - ts.time),
        }
        for name, ts in positions.items()
    }


def _report(
    uri: str,
    start: Timestamp,
    end: Timestamp,
    events: int,
    tailer: str,
    ours: dict[str, Any],
    native: dict[str, Any],
) -> dict[str, Any]:
    ours_ids: list[str] = ours.pop("ids")
    native_ids: list[str] | None = native.pop("ids", None)
    report: dict[str, Any] = {
        "uri": redact_text(uri, password_of(uri)),
        "start": [start.time, start.inc],
        "end": [end.time, end.inc],
        "max_events": events,
        "tailer": tailer,
        "shardstream": ours,
        "native": native,
        "speed_ratio": None,
        "identical": None,
        "first_mismatch": None,
    }
    if native_ids is not None:
        if native["events_per_s"] > 0:
            report["speed_ratio"] = ours["events_per_s"] / native["events_per_s"]
        report["first_mismatch"] = first_mismatch(ours_ids, native_ids)
        report["identical"] = report["first_mismatch"] is None
    return report


def first_mismatch(ours: list[str], native: list[str]) -> dict[str, Any] | None:
    """Where two ``_id`` sequences first differ (a missing event is ``None``), or None.

    >>> first_mismatch(["a", "b"], ["a", "c"])
    {'index': 1, 'shardstream': 'b', 'native': 'c'}
    >>> first_mismatch(["a"], ["a"]) is None
    True
    """
    for index in range(max(len(ours), len(native))):
        mine = ours[index] if index < len(ours) else None
        theirs = native[index] if index < len(native) else None
        if mine != theirs:
            return {"index": index, "shardstream": mine, "native": theirs}
    return None


def format_live_table(report: Mapping[str, Any]) -> str:
    """The report as a text table, one row per stream, then the comparison."""
    lines = [
        f"window: cluster time {_ts(report['start'])} to {_ts(report['end'])} (the cluster "
        f"time when the run started), at most {report['max_events']:,} events; latency = "
        "wall time out of the stream - the event's wallTime (includes the pre-fill's age)",
        f"{'stream':12s} {'events':>9s} {'events/s':>10s} {'MB/s':>7s} {'first':>7s} "
        f"{'catch-up':>9s} {'lat p50':>9s} {'p95':>9s} {'max':>9s}",
    ]
    for name in ("shardstream", "native"):
        lines.append(_row(name, report[name]))
    positions = report["shardstream"].get("shard_positions") or {}
    lines.append(
        "shardstream per-shard position (lag behind the cluster time at the end): "
        + ", ".join(
            f"{shard} {_ts(p['position']) if p['position'] else '?'} ({p['lag_s']} s)"
            for shard, p in positions.items()
        )
    )
    if report["speed_ratio"] is not None:
        lines.append(f"shardstream / native: {report['speed_ratio']:.2f}x events/s")
    if report["identical"] is not None:
        mismatch = report["first_mismatch"]
        lines.append("same events, same order: yes" if mismatch is None else f"DIFFER: {mismatch}")
    return "\n".join(lines)


def _row(name: str, run: Mapping[str, Any]) -> str:
    if not run["available"]:
        return f"{name:12s} unavailable: {run['error']}"
    latency = run["latency_s"] or {}
    first = run["first_event_s"]
    catch_up = run["catch_up_s"]
    return (
        f"{name:12s} {run['events']:9,d} {run['events_per_s']:10,.0f} "
        f"{run['bytes_per_s'] / 1e6:7.2f} {_seconds(first):>7s} "
        f"{_seconds(catch_up) if catch_up is not None else 'no':>9s} "
        + " ".join(f"{_seconds(latency.get(key)):>9s}" for key in ("p50", "p95", "max"))
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}s"


def _ts(pair: Sequence[int]) -> str:
    time_, inc = pair
    return f"{time_},{inc}"
