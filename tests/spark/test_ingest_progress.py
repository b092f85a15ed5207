"""The ingest's progress line: events, events/s, watermark and its lag."""

from __future__ import annotations

import dataclasses
import datetime
import io
from pathlib import Path

import bson
from bson.timestamp import Timestamp

from shardstream.resume_token import ResumeTokenData, encode_token
from shardstream.resume_token.token_data import TokenType
from shardstream.spark.delta.maintenance import Maintained
from shardstream.spark.delta.mirror.table import MirrorWrite
from shardstream.spark.delta.sink import BatchOutcome
from shardstream.spark.ingest.progress import IngestProgress, watermark_lag
from tests import factories as make


def _token(seconds: int) -> str:
    data = ResumeTokenData(
        cluster_time=Timestamp(seconds, 1), version=2, token_type=TokenType.HIGH_WATER_MARK
    )
    return encode_token(data).data


def _outcome(events: int, watermark: str) -> BatchOutcome:
    mirror = MirrorWrite(events, 0, events - 1, 1, 0)
    return BatchOutcome(0, events, watermark, events, mirror)


def test_log_lines_are_throttled_and_the_last_line_has_the_totals() -> None:
    now = [100.0]
    out = io.StringIO()
    progress = IngestProgress(out, interactive=False, clock=lambda: now[0])
    now[0] = 101.0
    progress.batch(_outcome(100, _token(1_700_000_000)))
    assert out.getvalue() == ""  # too soon for a log line
    now[0] = 110.0
    progress.batch(_outcome(300, _token(1_700_000_060)))
    assert out.getvalue().startswith("ingest: 400 events, 40 events/s, 2 batches, watermark ")
    progress.finish()
    last = out.getvalue().splitlines()[-1]
    assert "watermark 2023-11-14T22:14:20Z" in last
    totals = progress.totals
    assert (totals.changelog_rows, totals.mirror_upserts, totals.mirror_deletes) == (400, 398, 2)


def test_a_terminal_line_is_redrawn_in_place() -> None:
    out = io.StringIO()
    progress = IngestProgress(out, interactive=True)
    progress.batch(_outcome(5, _token(1_700_000_000)))
    assert out.getvalue().startswith("\r\x1b[2Kingest: 5 events")
    assert "\n" not in out.getvalue()


def test_lag_is_wall_clock_minus_the_watermarks_cluster_time() -> None:
    now = datetime.datetime(2023, 11, 14, 22, 16, 25, tzinfo=datetime.UTC)
    assert watermark_lag(_token(1_700_000_000), now) == (
        "watermark 2023-11-14T22:13:20Z (lag 3m 5s)"
    )
    later = now + datetime.timedelta(days=2, hours=5)
    assert watermark_lag(_token(1_700_000_000), later).endswith("(lag 2d 5h)")


def test_a_bounded_sources_lag_is_against_its_own_newest_time_not_the_wall_clock() -> None:
    """A simulated cluster's or an oplog file's clock may be anywhere (the demo's is in
    2026-01-01): its lag is measured from the source's newest entry, and not written when
    that is unknown (Extended JSON files)."""
    newest = Timestamp(1_700_000_125, 1)
    assert watermark_lag(_token(1_700_000_000), source_time=newest) == (
        "watermark 2023-11-14T22:13:20Z (lag 2m 5s behind the source's newest entry)"
    )
    assert watermark_lag(_token(1_700_000_000), source_time=None) == (
        "watermark 2023-11-14T22:13:20Z"
    )
    out = io.StringIO()
    progress = IngestProgress(out, interactive=False, clock=lambda: 100.0)
    progress.bounded, progress.source_time = True, newest
    progress.batch(_outcome(5, _token(1_700_000_000)))
    progress.finish()
    assert "behind the source's newest entry" in out.getvalue()
    assert "lag 2m 5s" in out.getvalue()


def test_a_maintenance_run_gets_a_line_of_its_own() -> None:
    out = io.StringIO()
    progress = IngestProgress(out, interactive=False, clock=lambda: 100.0)
    runs = (Maintained("/t/changelog", 100, 1), Maintained("/t/mirror", 40, 3))
    outcome = dataclasses.replace(_outcome(5, _token(1_700_000_000)), batch_id=99, maintained=runs)
    progress.batch(outcome)
    assert out.getvalue() == (
        "ingest: compacted after batch 99: changelog 100 -> 1 files, mirror 40 -> 3 files\n"
    )


def test_a_bounded_sources_newest_time_is_its_last_entry(tmp_path: Path) -> None:
    """The lag's reference for files and simulations: the newest ts over every shard (the
    index's last entry for BSON files, the run's last entry for a simulation); unknown for
    Extended JSON files and a live cluster."""
    from shardstream.spark.source.options import parse_options
    from shardstream.spark.source.shard_inputs import newest_time
    from shardstream.spark.source.simulated_input import simulated_run

    a, b = tmp_path / "a.bson", tmp_path / "b.bson"
    a.write_bytes(b"".join(bson.encode(make.insert(Timestamp(10, i), {"_id": i})) for i in (1, 2)))
    b.write_bytes(bson.encode(make.insert(Timestamp(12, 7), {"_id": 9})))
    assert newest_time(parse_options({"oplog": f"a={a},b={b}"})) == Timestamp(12, 7)
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("")
    assert newest_time(parse_options({"oplog": f"c={jsonl}"})) is None
    spec = parse_options({"simulate": "true", "shards": "2", "entries": "30", "seed": "3"})
    assert spec.simulation is not None
    last = max(oplog[-1]["ts"] for oplog in simulated_run(spec.simulation).oplogs.values())
    assert newest_time(spec) == last
    assert newest_time(parse_options({"uri": "mongodb://localhost:1/"})) is None
