"""``shardstream ingest``: a cluster's merged change stream into a Delta lakehouse, via Spark.

Argument parsing, the Spark session and output only; the work is
:func:`shardstream.spark.ingest.query.run_ingest`.  Writes the progress line on stderr and,
at the end, one JSON object of totals on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from shardstream.cli.ingest_options import check_table_paths, source_options
from shardstream.cli.options import add_stream_options
from shardstream.cli.uri_sources import URI, add_uri_file_argument, resolve_uri, usage_error
from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.oplog.redaction import redact_text
from shardstream.spark.ingest import (
    DEFAULT_BUCKETS,
    DEFAULT_MAX_COLUMNS,
    DEFAULT_MIRROR_WORKERS,
    DEFAULT_OPTIMIZE_EVERY,
    MirrorLayout,
)
from shardstream.spark.ingest.session import MIN_DRIVER_MEMORY, driver_memory_setting
from shardstream.spark.source.option_values import format_byte_size

if TYPE_CHECKING:
    from shardstream.spark.delta.sink import CrashPoint

# A micro-batch collects on the driver (toArrow) under Spark's 1 GiB defaults for the
# result size and local mode's driver memory, which the task result is copied into: batches
# of 256 MiB of 400 KB documents ran the local JVM out of heap, 64 MiB went through
# (benchmarks/README.md, "Large documents"; spark/source/option_values.py).
DEFAULT_MAX_BYTES_PER_BATCH: Final = 64 << 20
# Test hook (kill tests): "<point>:<batch id>", e.g. "between-commits:2".
CRASH_ENV: Final = "SHARDSTREAM_CRASH_AT_FOR_TEST"
# A Python error line in a traceback, e.g. "shardstream.errors.OplogError: ..." (the
# module path is dropped); shardstream's errors end in Error, Lost or NotFound.
_PYTHON_ERROR: Final = re.compile(r"^(?:[a-z_][\w.]*\.)?([A-Z]\w*(?:Error|Lost|NotFound)\b: .*)$")


def add_ingest_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``ingest`` and its options."""
    ingest = commands.add_parser(
        "ingest",
        help="stream a cluster's changes into a Delta change log and mirror (Spark)",
        description="Run Spark's readStream.format('shardstream') into PATH/changelog "
        "(every event, once) and PATH/mirror (every document's current state). Oplog files "
        "and simulated clusters are read to their end; a live cluster until interrupted.",
    )
    ingest.add_argument("--table", required=True, metavar="PATH", help="lakehouse root")
    inputs = ingest.add_mutually_exclusive_group(required=False)  # or $SHARDSTREAM_URI
    inputs.add_argument("--uri", help="mongos URI of a live cluster")
    add_uri_file_argument(inputs, URI, env_note=" when no other input is given")
    inputs.add_argument(
        "--shard", action="append", metavar="NAME=PATH", help="one shard's oplog file"
    )
    inputs.add_argument("--simulate", action="store_true", help="a simulated cluster")
    ingest.add_argument("--shards", type=int, help="--simulate: shards (default 3)")
    ingest.add_argument("--entries", type=int, help="--simulate: operations (default 1000)")
    ingest.add_argument("--seed", type=int, help="--simulate: seed (default 7)")
    ingest.add_argument("--input-format", choices=["bson", "ejson"], help="default: by extension")
    add_stream_options(ingest)
    ingest.add_argument(
        "--max-events-per-batch",
        type=int,
        metavar="N",
        help="events per micro-batch, at most (default: no count; --max-bytes-per-batch "
        "sizes the batches, so a batch's fixed cost is not paid every 10,000 events)",
    )
    ingest.add_argument(
        "--max-bytes-per-batch",
        default=format_byte_size(DEFAULT_MAX_BYTES_PER_BATCH),
        metavar="SIZE",
        help="about this many bytes of events (their BSON) per micro-batch, at most, as bytes "
        "or with k, m or g; a batch always takes at least one event "
        f"(default {format_byte_size(DEFAULT_MAX_BYTES_PER_BATCH)})",
    )
    ingest.add_argument(
        "--partition-mode",
        choices=["merged", "perShard"],
        default="merged",
        help="one task running the merger, or tasks per shard (default merged)",
    )
    ingest.add_argument(
        "--optimize-every",
        type=int,
        default=DEFAULT_OPTIMIZE_EVERY,
        metavar="N",
        help="compact both tables and checkpoint their logs after every N batches, so "
        f"thousands of batches leave few files (default {DEFAULT_OPTIMIZE_EVERY}; 0: never)",
    )
    ingest.add_argument(
        "--mirror-workers",
        type=int,
        default=DEFAULT_MIRROR_WORKERS,
        metavar="N",
        help="processes preparing a batch's mirror, a share of its documents each, for "
        f"batches of 4,000 events or more (default {DEFAULT_MIRROR_WORKERS}: the driver alone)",
    )
    ingest.add_argument("--checkpoint", metavar="DIR", help="default: PATH/_checkpoint")
    ingest.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    ingest.add_argument(
        "--driver-memory",
        metavar="SIZE",
        help="the Spark driver's JVM heap (spark.driver.memory), as bytes or with k, m or g, "
        f"at least {format_byte_size(MIN_DRIVER_MEMORY)}; in local mode the tasks run in it "
        "too (default: Spark's, 1g)",
    )
    ingest.add_argument(
        "--trigger-interval", default="1 second", help="live input: micro-batch interval"
    )
    ingest.add_argument(
        "--snapshot",
        action="store_true",
        help="--uri only: first load every document in scope as of T0 (the source's majority "
        "time) into the mirror, and into the change log as operationType 'read' rows "
        "(Debezium's op r; _id = the token at T0), then stream from T0; once per lakehouse, "
        "a restart neither reads it again nor loses it",
    )
    ingest.add_argument(
        "--mirror-layout",
        choices=[layout.value for layout in MirrorLayout],
        default=MirrorLayout.COLLECTIONS.value,
        help="collections (default): a typed Delta table per collection, PATH/mirror/DB/COLL, "
        "and its SCD2 history, PATH/history/DB/COLL, written by Spark's tasks (by the driver "
        "after a --snapshot or with --mirror-workers); single: one table, PATH/mirror, each "
        "document as canonical Extended JSON, written by the driver; bucketed: the single "
        "table partitioned by a hash of the document _id, each bucket rewritten by Spark's "
        "tasks; with the tasks writing, no event passes through the driver",
    )
    ingest.add_argument(
        "--mirror-buckets",
        type=int,
        default=DEFAULT_BUCKETS,
        metavar="B",
        help="the bucket count of a new bucketed mirror, or of the collections layout's "
        "document state when Spark's tasks write it; fixed once written "
        f"(default {DEFAULT_BUCKETS})",
    )
    ingest.add_argument(
        "--no-history",
        action="store_true",
        help="collections layout: keep no per-collection history tables",
    )
    ingest.add_argument(
        "--max-columns",
        type=int,
        default=DEFAULT_MAX_COLUMNS,
        metavar="N",
        help="collections layout: the most field columns a collection's table gets; other "
        f"fields are kept in its _rescued column (default {DEFAULT_MAX_COLUMNS})",
    )
    ingest.add_argument(
        "--no-mirror",
        action="store_true",
        help="write the change log alone: Spark's tasks write its files and the driver "
        "commits each batch's, so no event passes through the driver",
    )
    ingest.add_argument(
        "--lenient-mirror",
        action="store_true",
        help="skip (and count) updates of documents the mirror never held, instead of failing",
    )
    ingest.set_defaults(handler=_run_ingest_command)


def _run_ingest_command(args: argparse.Namespace) -> int:
    """Run ``ingest``; errors end it with exit code 1 and one line on stderr."""
    try:
        no_input = not (args.shard or args.simulate)
        args.uri = resolve_uri(args, URI, use_env=no_input)
        if args.uri is None and no_input:
            usage_error(
                args,
                "one of the arguments --uri --uri-file --shard --simulate is required "
                f"(or {URI.env} in the environment)",
            )
        options = source_options(args)
        check_table_paths(args)
        memory = driver_memory_setting(args.driver_memory)
        crash = _crash_point(os.environ.get(CRASH_ENV))
        from shardstream.spark.ingest.progress import IngestProgress
        from shardstream.spark.ingest.query import run_ingest
        from shardstream.spark.ingest.session import spark_session
        from shardstream.spark.ingest.settings import IngestSettings

        settings = IngestSettings(
            table=Path(args.table),
            source_options=options,
            bounded=not args.uri,
            checkpoint=Path(args.checkpoint) if args.checkpoint else None,
            trigger_interval=args.trigger_interval,
            strict=not args.lenient_mirror,
            optimize_every=args.optimize_every,
            mirror_workers=args.mirror_workers,
            snapshot=args.snapshot,
            crash_at_for_test=crash,
            mirror_layout=MirrorLayout(args.mirror_layout),
            history=not args.no_history,
            max_columns=args.max_columns,
            mirror=not args.no_mirror,
            mirror_buckets=args.mirror_buckets,
        )
    except ShardstreamError as exc:
        sys.stderr.write(f"shardstream ingest: error: {exc}\n")
        return 1
    except ImportError as exc:
        sys.stderr.write(
            "shardstream ingest: error: needs the spark extra (pip install "
            f"'shardstream[spark]'), missing {exc.name!r}\n"
        )
        return 1
    try:
        with spark_session(args.master, driver_memory=memory) as spark:
            totals = run_ingest(spark, settings, IngestProgress(sys.stderr))
    except ShardstreamError as exc:
        sys.stderr.write(f"shardstream ingest: error: {exc}\n")
        return 1
    except Exception as exc:
        from shardstream.spark.ingest.session import jvm_exited

        if jvm_exited(exc):
            sys.stderr.write(JVM_GONE + "\n")
            return 1
        # Spark's query errors quote the source's options (the URI among them).
        text = redact_text(spark_error_summary(str(exc)), *([args.uri] if args.uri else []))
        sys.stderr.write(f"shardstream ingest: error: {text}\n")
        return 1
    summary = {
        "batches": totals.batches,
        "events": totals.events,
        "changelogRows": totals.changelog_rows,
        "mirrorUpserts": totals.mirror_upserts,
        "mirrorDeletes": totals.mirror_deletes,
        "unknownUpdates": totals.unknown_updates,
        "snapshotDocuments": totals.snapshot_documents,
        "watermark": totals.watermark,
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


JVM_GONE: Final = (
    "shardstream ingest: error: Spark's JVM exited during the run (its log above says why, "
    "e.g. java.lang.OutOfMemoryError); the usual cause is a micro-batch too large for the "
    "driver's memory. The tables hold every batch committed before it. Spark replays a "
    "batch it has planned exactly as planned, so to cut it smaller, rerun with a lower "
    "--max-bytes-per-batch (or --max-events-per-batch) and without the checkpoint (remove "
    "it, default PATH/_checkpoint): the ingest then resumes after what the tables hold. Or "
    "give the driver more memory (--driver-memory; Spark's default is 1g)"
)


def spark_error_summary(text: str) -> str:
    """The line of a Spark error that names the Python error behind it, else its first line.

    A failure inside the source reaches the driver as a StreamingQueryException whose
    message holds the Python traceback and a Java stack trace; the user needs one line.

    >>> spark_error_summary("[STREAM_FAILED] Query ...\\nTraceback:\\n"
    ...     "shardstream.errors.OplogError: shard 'a' gone\\n\\tat org.apache...")
    "OplogError: shard 'a' gone"
    """
    lines = text.splitlines()
    for line in reversed(lines):
        match = _PYTHON_ERROR.match(line.strip())
        if match:
            return match.group(1)
    return lines[0] if lines else text


def _crash_point(text: str | None) -> tuple[CrashPoint, int] | None:
    if not text:
        return None
    from shardstream.spark.delta.sink import CrashPoint

    point, _, batch = text.partition(":")
    try:
        return CrashPoint(point), int(batch)
    except ValueError:
        raise ConfigurationError(
            f"expected {CRASH_ENV} as <{'|'.join(p.value for p in CrashPoint)}>:<batch id>, "
            f"got {text!r}"
        ) from None
