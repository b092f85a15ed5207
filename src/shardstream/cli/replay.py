"""``shardstream replay``: oplog files in, change events out (Extended JSON lines or BSON).

Argument parsing and output only; the work is :mod:`shardstream.replay.engine`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shardstream.cli.options import add_json_option, add_stream_options, options_from_args
from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.oplog import InputFormat
from shardstream.replay.engine import write_bson_events, write_json_events


def add_replay_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``replay`` and its options."""
    replay = commands.add_parser(
        "replay",
        help="turn oplog files into the change stream a server would emit",
        description="Read oplog entries (mongodump's oplog.bson or Extended JSON lines) and "
        "write the change events, one Extended JSON object per line (canonical, or relaxed "
        "with --json relaxed), or as concatenated BSON documents (--output-format bson).",
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
        "(several BSON shard files; default 0, like 1: this process alone)",
    )
    add_json_option(replay)
    add_stream_options(replay)
    replay.set_defaults(handler=_run_replay)


def _run_replay(args: argparse.Namespace) -> int:
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
            sys.stdout.flush()
            write_json_events(
                paths,
                input_format,
                options,
                sys.stdout.buffer,
                workers=args.workers,
                relaxed=args.json == "relaxed",
            )
    except ShardstreamError as exc:
        print(f"shardstream replay: error: {exc}", file=sys.stderr)
        return 1
    return 0


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
