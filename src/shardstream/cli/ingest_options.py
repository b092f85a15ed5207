"""``shardstream ingest``'s flags as the ``shardstream`` data source's options, checked first.

Everything the flags get wrong fails here, before a Spark session starts, with a message
naming the flag; the data source then parses the same values again with the same parsers.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from shardstream.cli.options import (
    check_mongodb_uri,
    namespace_filter_from_args,
    parse_server_version,
    parse_token_argument,
)
from shardstream.errors import ConfigurationError
from shardstream.spark.ingest import (
    DEFAULT_BUCKETS,
    DEFAULT_MAX_COLUMNS,
    DEFAULT_MIRROR_WORKERS,
    MAX_BUCKETS,
    MirrorLayout,
)
from shardstream.spark.source.option_values import parse_byte_size, timestamp_value

# replay's internal server flags have no data-source option.
_UNSUPPORTED_FLAGS: Final = (
    "show_migration_events",
    "show_system_events",
    "show_raw_update_description",
)


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``shardstream`` data-source options the flags describe."""
    for flag in _UNSUPPORTED_FLAGS:
        if getattr(args, flag):
            raise ConfigurationError(
                f"expected ingest's stream options, got --{flag.replace('_', '-')} "
                "(a replay-only server flag)"
            )
    simulation = {"shards": args.shards, "entries": args.entries, "seed": args.seed}
    if not args.simulate and any(value is not None for value in simulation.values()):
        raise ConfigurationError(
            "expected --shards/--entries/--seed only with --simulate, got them with "
            + ("--uri" if args.uri else "--shard")
        )
    for flag in ("shards", "entries"):  # checked here, not seconds later inside Spark
        if simulation[flag] is not None and simulation[flag] < 1:
            raise ConfigurationError(f"expected --{flag} N with N >= 1, got {simulation[flag]}")
    if args.input_format and not args.shard:
        raise ConfigurationError("expected --input-format only with --shard NAME=PATH inputs")
    if args.max_events_per_batch is not None and args.max_events_per_batch < 1:
        raise ConfigurationError(
            f"expected --max-events-per-batch >= 1, got {args.max_events_per_batch}"
        )
    if args.optimize_every < 0:
        raise ConfigurationError(
            f"expected --optimize-every N with N >= 0, got {args.optimize_every}"
        )
    if args.max_columns < 0:
        raise ConfigurationError(f"expected --max-columns N with N >= 0, got {args.max_columns}")
    if args.mirror_layout != MirrorLayout.COLLECTIONS.value and (
        args.no_history or args.max_columns != DEFAULT_MAX_COLUMNS
    ):
        raise ConfigurationError(
            "expected --no-history and --max-columns only with --mirror-layout collections"
        )
    if args.mirror_buckets != DEFAULT_BUCKETS and args.mirror_layout == MirrorLayout.SINGLE.value:
        raise ConfigurationError(
            "expected --mirror-buckets only with --mirror-layout collections or bucketed"
        )
    if not 1 <= args.mirror_buckets <= MAX_BUCKETS:
        raise ConfigurationError(
            f"expected --mirror-buckets B with 1 <= B <= {MAX_BUCKETS}, got {args.mirror_buckets}"
        )
    if args.no_mirror:
        given = [
            flag
            for flag, on in (
                ("--snapshot", args.snapshot),
                ("--mirror-layout", args.mirror_layout != MirrorLayout.COLLECTIONS.value),
                ("--no-history", args.no_history),
                ("--mirror-buckets", args.mirror_buckets != DEFAULT_BUCKETS),
                ("--max-columns", args.max_columns != DEFAULT_MAX_COLUMNS),
                ("--mirror-workers", args.mirror_workers != DEFAULT_MIRROR_WORKERS),
                ("--lenient-mirror", args.lenient_mirror),
            )
            if on
        ]
        if given:
            raise ConfigurationError(
                f"expected no mirror option with --no-mirror, got {', '.join(given)}"
            )
    if args.mirror_workers < 0:
        raise ConfigurationError(
            f"expected --mirror-workers N with N >= 0, got {args.mirror_workers}"
        )
    _check_stream_flags(args)
    options: dict[str, str] = {}
    if args.uri:
        check_mongodb_uri("--uri", args.uri)
        options["uri"] = args.uri
    elif args.shard:
        for shard in args.shard:
            name, sep, path = shard.partition("=")
            if not sep or not name or not path or "," in shard:
                raise ConfigurationError(f"expected --shard NAME=PATH (no commas), got {shard!r}")
        options["oplog"] = ",".join(args.shard)
        if args.input_format:
            options["inputFormat"] = args.input_format
    else:
        options["simulate"] = "true"
        options.update({key: str(value) for key, value in simulation.items() if value is not None})
    scope = {
        "db": args.db,
        "coll": args.coll,
        "serverVersion": args.server_version,
        "tokenVersion": args.token_version,
        "startAtOperationTime": args.start_at_operation_time,
        "resumeAfter": args.resume_after,
        "startAfter": args.start_after,
    }
    options.update({key: str(value) for key, value in scope.items() if value is not None})
    # Comma-joined, as the data source reads them (a pattern holding a comma is refused there).
    options.update({key: ",".join(value) for key, value in _patterns(args).items() if value})
    if args.show_expanded_events:
        options["showExpandedEvents"] = "true"
    if args.max_events_per_batch is not None:
        options["maxEventsPerTrigger"] = str(args.max_events_per_batch)
    max_bytes = parse_byte_size("--max-bytes-per-batch", args.max_bytes_per_batch)
    options["maxBytesPerTrigger"] = str(max_bytes)
    options["partitionMode"] = args.partition_mode
    return options


def _patterns(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """The source's ``include`` / ``exclude`` options, checked as replay and watch check them."""
    include, exclude = namespace_filter_from_args(args)
    for flag, patterns in (("--include", include), ("--exclude", exclude)):
        for pattern in patterns:
            if "," in pattern:
                raise ConfigurationError(
                    f"expected {flag} without a comma (the data source's option is a "
                    f"comma-separated list), got {pattern!r}"
                )
    return {"include": include, "exclude": exclude}


def _check_stream_flags(args: argparse.Namespace) -> None:
    """Parse the stream flags here, as replay and watch do, before Spark starts.

    The data source parses its options again (with the same parsers), in the driver once
    Spark runs; checked here, a malformed token fails at once and says which flag.
    """
    if args.server_version is not None:
        parse_server_version(args.server_version)
    if args.start_at_operation_time is not None:
        # The source also takes {"$timestamp": ...}: its own parser, not replay's T,I.
        timestamp_value("--start-at-operation-time", args.start_at_operation_time)
    for flag, text in (("--resume-after", args.resume_after), ("--start-after", args.start_after)):
        if text is not None:
            parse_token_argument(text, flag)


def check_table_paths(args: argparse.Namespace) -> None:
    """``--table`` and ``--checkpoint`` are directories, existing or to be made.

    A path that is a file would fail deep inside Spark with a line naming neither flag
    ("An error occurred while calling o63.start").
    """
    for flag, path in (("--table", args.table), ("--checkpoint", args.checkpoint)):
        if path is None:
            continue
        for part in (Path(path), *Path(path).parents):
            if part.exists() and not part.is_dir():
                raise ConfigurationError(
                    f"expected {flag} as a directory (existing or to be made), got {path!r}, "
                    f"where {str(part)!r} is a file"
                )
