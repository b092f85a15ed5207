"""``shardstream bench --uri``: mongos's native change stream and shardstream over one window.

As the server's ``change_streams_listen_throughput`` workload: take a cluster time, pre-fill,
then read both streams from that time, one after the other, each until ``events`` events or
until caught up with the cluster time taken when the run starts (the window is ``[start, that
time)``).  Reported for each: events/s, BSON bytes/s, latency (wall time out of the stream minus
the event's ``wallTime``: on a replay mostly the pre-fill's age, hence the catch-up time too);
for shardstream each shard's position.  A native stream that cannot be opened (no privileges;
the emulator's mongos runs no ``$changeStream``) is reported unavailable with the server's message.
Credentials never reach the output.
"""

from __future__ import annotations

import datetime
import itertools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import bson
from bson.timestamp import Timestamp
from pymongo.errors import PyMongoError

from shardstream.bench.common import cluster_time, error_text, open_client
from shardstream.bench.latency_report import positions_report
from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.oplog.redaction import password_of, redact_text
from shardstream.resume_token import decode_token_document
from shardstream.stream import watch

DEFAULT_EVENTS, DEFAULT_IDLE_TIMEOUT_S = 100_000, 30.0
_AWAIT = 500  # ms: how long an empty getMore waits


def resolve_start(now: Timestamp, at: Timestamp | None, since_seconds: float | None) -> Timestamp:
    """The window's start: ``at``, or ``since_seconds`` before ``now`` (one is required)."""
    if (at is None) == (since_seconds is None):
        got = "both" if at is not None else "neither"
        raise ConfigurationError(
            "expected one of --start-at-operation-time T,I (a cluster time taken before the "
            f"pre-fill) or --since-seconds S with --uri, got {got}"
        )
    if at is not None:
        return at
    if since_seconds is None or since_seconds <= 0:
        raise ConfigurationError(f"expected --since-seconds S with S > 0, got {since_seconds}")
    return Timestamp(max(1, now.time - int(since_seconds)), 0)


def read_window(
    stream: Any, opened: float, end: Timestamp, events: int, idle_timeout_s: float
) -> dict[str, Any]:
    """Read ``stream`` (pymongo's or ours) until ``events`` events, or caught up: an event
    or the high-water mark at or past ``end``; timed without the BSON sizing of events.
    The figures, and under ``"ids"`` the events' ``_id._data`` in order."""
    ids: list[str] = []
    latencies: list[float] = []  # seconds, for events with a wallTime
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
        if isinstance(wall := event.get("wallTime"), datetime.datetime):  # 6.0+
            latencies.append(now - _epoch(wall))
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


def _epoch(wall: datetime.datetime) -> float:
    # pymongo's default is a naive datetime in UTC; ours are UTC-aware.
    return (wall if wall.tzinfo else wall.replace(tzinfo=datetime.UTC)).timestamp()


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return {"p50": statistics.median(ordered), "p95": p95, "max": ordered[-1]}


def _timed(
    opener: Callable[[], AbstractContextManager[Any]], end: Timestamp, events: int, idle: float
) -> dict[str, Any]:
    opened = time.perf_counter()
    with opener() as stream:
        result = read_window(stream, opened, end, events, idle)
        positions = getattr(stream, "shard_positions", None)  # shardstream's only
        result["shard_positions"] = positions() if positions else None
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
    client = open_client(uri)
    try:
        try:
            end = cluster_time(client)
        except PyMongoError as exc:
            raise ShardstreamError(f"cannot read the cluster time: {error_text(exc, uri)}") from exc
        start = resolve_start(end, start_at, since_seconds)

        def ours() -> Any:
            return watch(
                uri, start_at_operation_time=start, max_await_time_ms=_AWAIT, tailer=tailer
            )

        def native() -> Any:
            return client.watch(start_at_operation_time=start, max_await_time_ms=_AWAIT)

        try:
            mine = _timed(ours, end, events, idle_timeout_s)
            mine["shard_positions"] = positions_report(
                mine["shard_positions"], cluster_time(client)
            )
        except (ShardstreamError, PyMongoError) as exc:
            raise ShardstreamError(f"shardstream stream failed: {error_text(exc, uri)}") from exc
        try:
            theirs = _timed(native, end, events, idle_timeout_s) | {"shard_positions": None}
        except PyMongoError as exc:
            theirs = {"available": False, "error": error_text(exc, uri)}
    finally:
        client.close()
    return _report(uri, (start, end, events, tailer), mine, theirs)


def _report(
    uri: str,
    run: tuple[Timestamp, Timestamp, int, str],
    ours: dict[str, Any],
    native: dict[str, Any],
) -> dict[str, Any]:
    start, end, events, tailer = run
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
    } | dict.fromkeys(("speed_ratio", "identical", "first_mismatch"))
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
    for index, (mine, theirs) in enumerate(itertools.zip_longest(ours, native)):
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
    latency, caught_up = run["latency_s"] or {}, run["catch_up_s"] is not None
    return (
        f"{name:12s} {run['events']:9,d} {run['events_per_s']:10,.0f} "
        f"{run['bytes_per_s'] / 1e6:7.2f} {_seconds(run['first_event_s']):>7s} "
        f"{_seconds(run['catch_up_s']) if caught_up else 'no':>9s} "
        + " ".join(f"{_seconds(latency.get(key)):>9s}" for key in ("p50", "p95", "max"))
    )


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 86400:.1f}d" if value >= 86400 else f"{value:.3g}s"


def _ts(pair: Sequence[int]) -> str:
    return ",".join(map(str, pair))
