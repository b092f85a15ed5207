"""``shardstream watch URI``: a live cluster's merged change stream as Extended JSON lines.

Argument parsing, output and the ``--stats`` line only; the work is
:func:`shardstream.watch`.  Credentials in the URI never reach the output.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from shardstream.cli.options import (
    add_json_option,
    add_stream_options,
    options_from_args,
)
from shardstream.cli.uri_sources import WATCH_URI, add_uri_file_argument, require_uris
from shardstream.errors import ConfigurationError, OplogError, ShardstreamError
from shardstream.oplog.read_preference import READ_PREFERENCE_MODES
from shardstream.oplog.redaction import redact_text
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.extended_json import bson_to_json

if TYPE_CHECKING:
    from shardstream.change_stream import ChangeStream

STATS_EVERY_S = 5.0


def add_watch_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``watch`` and its options."""
    parser = commands.add_parser(
        "watch",
        help="tail every shard of a live cluster and write the merged change stream",
        description="Discover the shards through mongos, tail each shard's oplog in parallel, "
        "and write the events mongos would emit, one Extended JSON object per line "
        "(canonical, or relaxed with --json relaxed).",
    )
    parser.add_argument(
        "uri",
        nargs="?",  # or from --uri-file PATH, else $SHARDSTREAM_URI
        metavar="URI",
        help="a mongos connection string (or --uri-file PATH, or SHARDSTREAM_URI)",
    )
    add_uri_file_argument(parser, WATCH_URI)
    add_stream_options(parser)
    add_json_option(parser)
    parser.add_argument("--max-events", type=int, help="stop after this many events")
    parser.add_argument(
        "--read-preference",
        default="primary",
        choices=READ_PREFERENCE_MODES,
        help="which member of each shard to tail (secondaries offload primaries; default primary)",
    )
    parser.add_argument(
        "--no-shard-monitor",
        action="store_true",
        help="do not tail the config server for shards added mid-stream (if getShardMap is "
        "refused); only the shards listed at the start are read",
    )
    parser.add_argument(
        "--tailer",
        default="thread",
        choices=["thread", "process"],
        help="tail each shard in a thread or in a child process (default thread)",
    )
    parser.add_argument(
        "--stats", action="store_true", help="print throughput and per-shard lag to stderr"
    )
    parser.set_defaults(handler=_run_watch)


def _run_watch(args: argparse.Namespace) -> int:
    """Run ``watch`` until interrupted (or ``--max-events``); errors exit 1 with one line."""
    # Imported here: pymongo is only needed once a command talks to a cluster, and every
    # command's start-up would otherwise pay for it (see shardstream/__init__.py).
    from shardstream.stream import watch

    try:
        if args.max_events is not None and args.max_events < 1:
            raise ConfigurationError(f"expected --max-events N with N >= 1, got {args.max_events}")
        (args.uri,) = require_uris(args, WATCH_URI)
        options = options_from_args(args)
        with watch(
            args.uri,
            max_await_time_ms=1000,
            read_preference=args.read_preference,
            monitor_shards=not args.no_shard_monitor,
            tailer=args.tailer,
            **_watch_arguments(options),
        ) as stream:
            _follow(stream, args, sys.stdout, sys.stderr)
    except ShardstreamError as exc:
        print(f"shardstream watch: error: {redact_text(str(exc), args.uri)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _watch_arguments(options: ChangeStreamOptions) -> dict[str, Any]:
    """The ``watch()`` keywords that reproduce ``options``."""
    arguments: dict[str, Any] = {
        "db": options.db,
        "coll": options.coll,
        "include": options.include,
        "exclude": options.exclude,
        "show_expanded_events": options.show_expanded_events,
        "start_at_operation_time": options.start_at_operation_time,
        "show_system_events": options.show_system_events,
        "show_raw_update_description": options.show_raw_update_description,
        "server_version": options.server_version,
        "token_version": options.token_version,
    }
    from shardstream.resume_token import encode_token

    if options.resume_after is not None:
        arguments["resume_after"] = encode_token(options.resume_after).to_document()
    if options.start_after is not None:
        arguments["start_after"] = encode_token(options.start_after).to_document()
    return arguments


def _follow(stream: ChangeStream, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    limit, stats, relaxed = args.max_events, args.stats, args.json == "relaxed"
    count, window, window_start = 0, 0, time.monotonic()
    while stream.alive and (limit is None or count < limit):
        raw = stream.try_next_raw()
        if raw is not None:
            try:
                line = bson_to_json(raw, relaxed=relaxed)
            except ValueError as exc:  # a corrupt value the fast path copied from an entry
                raise OplogError(f"expected an event of well-formed BSON: {exc}") from exc
            out.write(line + "\n")
            out.flush()
            count += 1
            window += 1
        now = time.monotonic()
        if stats and now - window_start >= STATS_EVERY_S:
            print(_stats_line(stream, window / (now - window_start), count), file=err)
            window, window_start = 0, now


def _stats_line(stream: ChangeStream, rate: float, total: int) -> str:
    now = time.time()
    lags = ", ".join(
        f"{name} {'?' if ts is None else f'{max(0.0, now - ts.time):.1f}s'}"
        for name, ts in stream.shard_positions().items()
    )
    return f"shardstream: {rate:,.0f} events/s, {total} events; lag per shard: {lags}"
