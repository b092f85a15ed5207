"""Ingest: the progress line on stderr (events, events/s, watermark lag).

On a terminal one line is redrawn in place after every batch; otherwise (logs, CI) a
line is written at most every few seconds, and always at the end.  The watermark lag is
how far the lakehouse is behind its source: for a live cluster, wall-clock time (which the
cluster's clock follows) minus the cluster time of the last event committed; for oplog files
and a simulated run, whose clocks may be anywhere, the source's own newest cluster time
(:attr:`IngestProgress.source_time`) minus it, and no lag when that is unknown.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, TextIO

from bson.timestamp import Timestamp

from shardstream.spark.delta.commits import watermark_cluster_time
from shardstream.spark.delta.sink import BatchOutcome

_LOG_INTERVAL_SECS: Final = 5.0


@dataclasses.dataclass(slots=True)
class IngestTotals:
    """What an ingest has done so far.

    Attributes:
        batches: micro-batches seen (replayed ones included).
        events: events in them.
        changelog_rows: rows appended to the change log.
        mirror_upserts / mirror_deletes: mirror rows written / deleted.
        unknown_updates: updates of documents the mirror never held (lenient mode, or
            before a snapshot's read end).
        watermark: the last event's token (None: no event yet).
        snapshot_documents: documents a snapshot loaded in this run (``--snapshot``).
    """

    batches: int = 0
    events: int = 0
    changelog_rows: int = 0
    mirror_upserts: int = 0
    mirror_deletes: int = 0
    unknown_updates: int = 0
    watermark: str | None = None
    snapshot_documents: int = 0

    def add(self, outcome: BatchOutcome) -> None:
        """Count one batch."""
        self.batches += 1
        self.events += outcome.events
        self.changelog_rows += outcome.changelog_rows or 0
        if outcome.mirror is not None:
            self.mirror_upserts += outcome.mirror.rows_written
            self.mirror_deletes += outcome.mirror.rows_deleted
            self.unknown_updates += outcome.mirror.unknown_updates
        if outcome.watermark is not None:
            self.watermark = outcome.watermark


class IngestProgress:
    """Reports an ingest's totals on ``out`` (stderr)."""

    def __init__(
        self,
        out: TextIO,
        *,
        interactive: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.totals = IngestTotals()
        self._interactive = out.isatty() if interactive is None else interactive
        self._clock = clock
        self._started = clock()
        self._last_logged = self._started
        self.bounded = False
        """The source ends by itself (files, simulated): lags are against :attr:`source_time`."""
        self.source_time: Timestamp | None = None
        """A bounded source's newest cluster time (None: unknown, no lag shown)."""

    def batch(self, outcome: BatchOutcome) -> None:
        """Count a batch and redraw (or, not on a terminal, log now and then)."""
        self.totals.add(outcome)
        now = self._clock()
        if outcome.maintained:  # a line of its own: it explains a slower batch
            files = ", ".join(
                f"{Path(m.table).name} {m.files_before} -> {m.files_after} files"
                for m in outcome.maintained
            )
            ending = "\r\x1b[2K" if self._interactive else ""
            self.out.write(f"{ending}ingest: compacted after batch {outcome.batch_id}: {files}\n")
        if self._interactive:
            self.out.write("\r\x1b[2K" + self.line(now))
            self.out.flush()
        elif now - self._last_logged >= _LOG_INTERVAL_SECS:
            self._last_logged = now
            self.out.write(self.line(now) + "\n")
            self.out.flush()

    def finish(self) -> None:
        """Write the final line."""
        ending = "\r\x1b[2K" if self._interactive else ""
        self.out.write(ending + self.line(self._clock()) + "\n")
        self.out.flush()

    def line(self, now: float) -> str:
        """The progress line as of ``now`` (the clock's time)."""
        totals = self.totals
        elapsed = max(now - self._started, 1e-9)
        parts = [
            f"{totals.events:,} events",
            f"{totals.events / elapsed:,.0f} events/s",
            f"{totals.batches} batches",
        ]
        if totals.watermark is not None:
            if not self.bounded:
                parts.append(watermark_lag(totals.watermark))
            else:
                parts.append(watermark_lag(totals.watermark, source_time=self.source_time))
        return "ingest: " + ", ".join(parts)


def watermark_lag(
    watermark: str,
    now: datetime.datetime | None = None,
    *,
    source_time: Timestamp | bool | None = False,
) -> str:
    """``watermark <cluster time> (lag <duration>)`` for a token's ``_data`` hex.

    Args:
        now: the wall-clock time to measure a live source's lag from (default: now).
        source_time: a bounded source's newest cluster time, to measure the lag from
            instead of the wall clock (None: unknown, no lag written).
    """
    seconds = watermark_cluster_time(watermark).time
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    mark = f"watermark {moment:%Y-%m-%dT%H:%M:%SZ}"
    if source_time is None:
        return mark
    if isinstance(source_time, Timestamp):
        return (
            f"{mark} (lag {_duration(source_time.time - seconds)} behind the source's newest entry)"
        )
    lag = ((now or datetime.datetime.now(datetime.UTC)) - moment).total_seconds()
    return f"{mark} (lag {_duration(lag)})"


def _duration(seconds: float) -> str:
    """A short human duration: ``42s``, ``3m 5s``, ``2h 4m``, ``9d 3h``."""
    whole = max(int(seconds), 0)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
