"""The figures and the table of ``shardstream bench --duration`` (live tail), from the samples.

Only events of the write window count (documents whose insert time ``sent`` is in
``[t_open, t_end)``: written after both streams were open, before the writer stopped);
against what was written: missed (written, never seen), duplicated (seen again) and
unexpected (seen, in the window, never written by this run's writer).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from bson.timestamp import Timestamp

from shardstream.bench.common import Fence


def positions_report(positions: Mapping[str, Timestamp | None], now: Timestamp) -> dict[str, Any]:
    """Each shard's position and its lag in seconds behind the cluster time ``now``."""
    return {
        name: {
            "position": None if ts is None else [ts.time, ts.inc],
            "lag_s": None if ts is None else max(0, now.time - ts.time),
        }
        for name, ts in positions.items()
    }


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """Nearest-rank p50, p95, p99 and the maximum, or None without values.

    >>> percentiles([0.4, 0.1, 0.3, 0.2])
    {'p50': 0.3, 'p95': 0.4, 'p99': 0.4, 'max': 0.4}
    """
    if not values:
        return None
    ordered = sorted(values)
    last = len(ordered) - 1

    def rank(fraction: float) -> float:
        return ordered[min(last, int(len(ordered) * fraction))]

    return {"p50": rank(0.5), "p95": rank(0.95), "p99": rank(0.99), "max": ordered[-1]}


def stream_report(
    result: Mapping[str, Any] | None,
    error: str | None,
    written: set[str],
    fence: Fence,
    now: Timestamp,
) -> dict[str, Any]:
    """One stream's figures from its reader's samples (or unavailable, with ``error``)."""
    if result is None:
        return {"available": False, "error": error or "no report from the reader"}
    samples = result["samples"]
    rows = [
        row
        for row in zip(*(samples[k] for k in ("key", "sent", "out", "wall", "size")), strict=True)
        if fence.t_open <= row[1] < fence.t_end
    ]
    seen = {row[0] for row in rows}
    size = sum(row[4] for row in rows)
    # From both streams' opening to this one's last event of the window: at a steady
    # write rate, a stream that keeps up shows about the write rate.
    seconds = max(row[2] for row in rows) - fence.t_open if rows else None
    positions = result.get("shard_positions")
    return {
        "available": True,
        "events": len(rows),
        "missed": len(written - seen),
        "duplicated": len(rows) - len(seen),
        "unexpected": len(seen - written),
        "outside_window": len(samples["key"]) - len(rows),
        "other_events": result["other_events"],
        "bytes": size,
        "seconds": seconds,
        "events_per_s": len(rows) / seconds if seconds else None,
        "bytes_per_s": size / seconds if seconds else None,
        "latency_s": percentiles([row[2] - row[1] for row in rows]),
        "wall_latency_s": percentiles([row[2] - row[3] for row in rows if row[3] is not None]),
        "stopped": result["stopped"],
        "shard_positions": None if positions is None else positions_report(positions, now),
    }


def format_latency_table(report: Mapping[str, Any]) -> str:
    """The report as a text table: the run, one row per stream, the per-shard lag."""
    lines = [
        report["header"],
        "latency = time.time() as the event leaves the stream - the document's insert time; "
        "wall = the same - the event's wallTime (the server's clock)",
        f"{'stream':12s} {'events':>8s} {'missed':>6s} {'dup':>5s} {'events/s':>9s} "
        f"{'MB/s':>6s} {'p50':>8s} {'p95':>8s} {'p99':>8s} {'max':>8s} | {'wall p50':>8s} "
        f"{'p99':>8s} {'max':>8s}",
    ]
    for name in ("shardstream", "native"):
        lines.append(_row(name, report[name]))
    positions = report["shardstream"].get("shard_positions") or {}
    if positions:
        lines.append(
            "shardstream per-shard position at the end (lag behind the cluster time): "
            + ", ".join(
                f"{shard} {_ts(p['position'])} ({p['lag_s']} s)" for shard, p in positions.items()
            )
        )
    return "\n".join(lines)


def header(report: Mapping[str, Any]) -> str:
    """The run in one line: server, writes, readers."""
    rate = report["write_rate"]
    writer = f"{rate:,g} inserts/s requested, from this process" if rate else "another writer"
    return (
        f"live tail on {report['server']}, {report['duration_s']:g} s into "
        f"{report['namespace']} by {writer}: {report['written']:,} written "
        f"({report['achieved_write_rate']:,.0f}/s); readers: {report['readers']}, shardstream "
        f"tailer {report['tailer']}, shard monitor {'on' if report['shard_monitor'] else 'off'}, "
        f"max await {report['max_await_ms']} ms"
    )


def plot_latency(report: Mapping[str, Any], path: str) -> bool:
    """Bars of each available stream's latency percentiles, in ms; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    keys = ("p50", "p95", "p99", "max")
    runs = [(n, report[n]) for n in ("shardstream", "native") if report[n].get("latency_s")]
    figure, axes = plt.subplots(figsize=(8, 3.2))
    height = 0.8 / max(len(runs), 1)
    for index, (name, run) in enumerate(runs):
        values = [run["latency_s"][key] * 1000 for key in keys]
        positions = [k + index * height for k in range(len(keys))]
        axes.barh(positions, values, height=height, label=name)
    axes.set_yticks([k + height * (len(runs) - 1) / 2 for k in range(len(keys))], keys)
    axes.set_xlabel("latency, ms (out of the stream - insert time)")
    axes.set_title(textwrap.fill(report["header"], 110), fontsize=7)
    axes.invert_yaxis()
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _row(name: str, run: Mapping[str, Any]) -> str:
    if not run["available"]:
        return f"{name:12s} unavailable: {run['error']}"
    latency, wall = run["latency_s"] or {}, run["wall_latency_s"] or {}
    rate, bytes_rate = run["events_per_s"] or 0.0, run["bytes_per_s"] or 0.0
    return (
        f"{name:12s} {run['events']:8,d} {run['missed']:6,d} {run['duplicated']:5,d} "
        f"{rate:9,.0f} {bytes_rate / 1e6:6.2f} "
        + " ".join(f"{_ms(latency.get(key)):>8s}" for key in ("p50", "p95", "p99", "max"))
        + " | "
        + " ".join(f"{_ms(wall.get(key)):>8s}" for key in ("p50", "p99", "max"))
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}ms"


def _ts(pair: Sequence[int] | None) -> str:
    return "?" if pair is None else ",".join(map(str, pair))
