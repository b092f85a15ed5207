"""``shardstream replay``: oplog files in, change events out (Extended JSON lines or BSON).

Argument parsing and output only; the work is :func:`shardstream.transform.transform_oplog`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenError, ShardstreamError
from shardstream.oplog import InputFormat
from shardstream.replay_bson import reference_event_batches, write_bson_events
from shardstream.resume_token import ResumeTokenData, decode_token, decode_token_document
from shardstream.resume_token.token_json import loads
from shardstream.transform import ChangeStreamOptions, event_to_json

REPLAY_BATCH = 1000


def add_replay_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``replay`` and its options."""
    replay = commands.add_parser(
        "replay",
        help="turn oplog files into the change stream a server would emit",
        description="Read oplog entries (mongodump's oplog.bson or Extended JSON lines) and "
        "write the change events, one canonical Extended JSON object per line, or as "
        "concatenated BSON documents (--output-format bson).",
    )
    replay.add_argument("path", nargs="?", metavar="PATH", help="oplog file ('-' = stdin)")
    replay.add_argument(
        "--shard", action="append", default=[], metavar="NAME=PATH", help="one shard's oplog"
    )
    replay.add_argument("--input-format", choices=["bson", "ejson"], help="default: by extension")
    replay.add_argument(
        "--output-format",
        choices=["ejson", "bson"],
        default="ejson",
        help="ejson: one Extended JSON line per event (default); bson: concatenated BSON events",
    )
    replay.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="decode and transform the shards in N processes: this one and N-1 workers "
        "(BSON output of several shards; default 0, like 1: this process alone)",
    )
    add_stream_options(replay)
    replay.set_defaults(handler=run_replay)


def add_stream_options(parser: argparse.ArgumentParser) -> None:
    """The change-stream flags ``replay`` and ``watch`` share."""
    parser.add_argument("--db", help="watch one database (default: the whole cluster)")
    parser.add_argument("--coll", help="watch one collection of --db")
    parser.add_argument("--show-expanded-events", action="store_true")
    parser.add_argument("--server-version", default="8.2", metavar="X.Y", help="default 8.2")
    parser.add_argument("--token-version", type=int, choices=[1, 2])
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--start-at-operation-time", metavar="T,I")
    start.add_argument("--resume-after", metavar="TOKEN")
    start.add_argument("--start-after", metavar="TOKEN")
    # The server's internal flags: kept out of the short help, but they work.
    for flag in (
        "--show-migration-events",
        "--show-system-events",
        "--show-raw-update-description",
    ):
        parser.add_argument(flag, action="store_true", help=argparse.SUPPRESS)


def run_replay(args: argparse.Namespace) -> int:
    """Run ``replay``; errors end it with exit code 1 and one line on stderr."""
    try:
        options = options_from_args(args)
        paths = _shard_paths(args.path, args.shard)
        input_format = InputFormat(args.input_format) if args.input_format else None
        if args.workers < 0:
            raise ConfigurationError(f"expected --workers N with N >= 0, got {args.workers}")
        if args.output_format == "bson":
            write_bson_events(paths, input_format, options, sys.stdout.buffer, workers=args.workers)
        else:
            _write_events(paths, input_format, options, sys.stdout)
    except ShardstreamError as exc:
        print(f"shardstream replay: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _write_events(
    shards: Sequence[tuple[str, str]],
    input_format: InputFormat | None,
    options: ChangeStreamOptions,
    out: TextIO,
) -> None:
    for events in reference_event_batches(shards, input_format, options):
        for event in events:
            out.write(event_to_json(event.document))
            out.write("\n")
    out.flush()


def _shard_paths(path: str | None, shards: Sequence[str]) -> list[tuple[str, str]]:
    paths = [("shard0", path)] if path else []
    for shard in shards:
        name, sep, shard_path = shard.partition("=")
        if not sep or not name or not shard_path:
            raise ConfigurationError(f"expected --shard NAME=PATH, got {shard!r}")
        paths.append((name, shard_path))
    if not paths:
        raise ConfigurationError("expected an oplog PATH or at least one --shard NAME=PATH")
    names = [name for name, _ in paths]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"expected distinct shard names, got {names}")
    return paths


def options_from_args(args: argparse.Namespace) -> ChangeStreamOptions:
    """Build the stream options the flags describe."""
    return ChangeStreamOptions(
        db=args.db,
        coll=args.coll,
        show_expanded_events=args.show_expanded_events,
        show_system_events=args.show_system_events,
        show_migration_events=args.show_migration_events,
        show_raw_update_description=args.show_raw_update_description,
        server_version=parse_server_version(args.server_version),
        token_version=args.token_version,
        start_at_operation_time=(
            parse_timestamp(args.start_at_operation_time) if args.start_at_operation_time else None
        ),
        resume_after=parse_token_argument(args.resume_after) if args.resume_after else None,
        start_after=parse_token_argument(args.start_after) if args.start_after else None,
    )


def parse_server_version(text: str) -> tuple[int, int]:
    """``8.0`` -> (8, 0)."""
    major, sep, minor = text.partition(".")
    if not sep or not major.isdigit() or not minor.isdigit():
        raise ConfigurationError(f"expected --server-version as X.Y (e.g. 7.0), got {text!r}")
    return int(major), int(minor)


def parse_timestamp(text: str) -> Timestamp:
    """``1700000000,1`` -> Timestamp(1700000000, 1)."""
    seconds, _, increment = text.partition(",")
    try:
        return Timestamp(int(seconds), int(increment))
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"expected a timestamp as T,I (seconds,increment), got {text!r}"
        ) from exc


def parse_token_argument(text: str) -> ResumeTokenData:
    """A token document in Extended JSON, or a bare ``_data`` hex string."""
    if text.lstrip().startswith("{"):
        try:
            document = loads(text)
        except (ValueError, TypeError, KeyError) as exc:
            raise ResumeTokenError(
                f"expected a token document in Extended JSON, got {text!r:.120}"
            ) from exc
        return decode_token_document(document)
    return decode_token(text.strip())
