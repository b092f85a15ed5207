"""``shardstream bench``: replay throughput, fast path against reference, next to the decode rate.

The offline mode replays oplog files (given with ``--shard``, or a seeded
corpus it writes to a temporary directory) to BSON events, in this process, and
reports each rate with its ratio to the streaming ``bson.decode_file_iter``-to-dicts
rate of the same files measured round robin in the same run: a table, a JSON
document, and a plot when matplotlib is installed and ``--plot`` is given.  With
``--uri`` it runs the live mode instead (:mod:`shardstream.bench.live`): mongos's
native change stream and shardstream's over the same window of a cluster's oplogs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from shardstream.bench.corpus import oplog_bytes
from shardstream.bench.offline import Rate, Shards, format_table
from shardstream.bench.replay_measure import measure
from shardstream.cli.bench_output import write_report
from shardstream.cli.options import parse_timestamp
from shardstream.cli.uri_sources import URI, add_uri_file_argument, resolve_uri
from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.oplog.redaction import redact_text


def add_bench_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench`` and its options."""
    bench = commands.add_parser(
        "bench",
        help="measure replay throughput against the BSON decode rate, or (--uri) a live "
        "cluster's native change stream against shardstream's",
        description="Replay oplog files to BSON events with the fast path and with the "
        "reference pipeline, next to the decode rate of the same bytes; with --uri, read one "
        "window of a cluster's oplogs with the native change stream and with shardstream. "
        "Print a table and a JSON document.",
    )
    bench.add_argument(
        "--shard", action="append", default=[], metavar="NAME=PATH", help="one shard's oplog.bson"
    )
    bench.add_argument(
        "--entries",
        type=int,
        default=25_000,
        metavar="N",
        help="without --shard: entries per shard of the generated corpus (default 25000)",
    )
    bench.add_argument("--shards", type=int, default=4, metavar="K", help="default 4")
    bench.add_argument("--repeats", type=int, default=3, metavar="R", help="default 3")
    bench.add_argument(
        "--workers", type=int, default=0, metavar="N", help="also measure --workers N"
    )
    bench.add_argument("--no-reference", action="store_true", help="skip the slow reference path")
    bench.add_argument("--plot", metavar="PNG", help="write a plot (needs matplotlib)")
    bench.add_argument("--json", metavar="PATH", help="also write the JSON report to PATH")
    live = bench.add_argument_group(
        "live mode", "with --uri: mongos's native change stream against shardstream's"
    )
    live.add_argument("--uri", help="a mongos connection string: run the live mode")
    add_uri_file_argument(
        live,
        URI,
        env_note=", and only with --start-at-operation-time, --since-seconds or --duration",
    )
    live.add_argument(
        "--start-at-operation-time",
        metavar="T,I",
        help="the window's start: a cluster time taken before the pre-fill",
    )
    live.add_argument(
        "--since-seconds", type=float, metavar="S", help="or: S seconds before the cluster time"
    )
    live.add_argument(
        "--events", type=int, default=100_000, metavar="N", help="at most N events (100000)"
    )
    live.add_argument("--tailer", default="thread", choices=["thread", "process"])
    tail = bench.add_argument_group(
        "live tail",
        "with --uri and --duration: both streams open now, at once, while a writer inserts "
        "through mongos; latency = out of the stream - the document's insert time",
    )
    tail.add_argument("--duration", type=float, metavar="S", help="write and tail for S seconds")
    tail.add_argument(
        "--write-rate",
        type=float,
        default=1000.0,
        metavar="N",
        help="inserts/s through mongos (1000); 0: another writer inserts (the emulator's: "
        "python -m shardstream.bench.emulated --write-rate N), counted through mongos",
    )
    tail.add_argument(
        "--max-await-ms", type=int, default=500, metavar="MS", help="per empty getMore (500)"
    )
    tail.add_argument(
        "--no-shard-monitor", action="store_true", help="shardstream without its config monitor"
    )
    tail.add_argument(
        "--namespace",
        metavar="DB.COLL",
        help="the bench collection (shardstream_bench.events); on a real cluster shard it, "
        "or all writes go to one shard",
    )
    tail.add_argument(
        "--shard-collection",
        action="store_true",
        help="first run enableSharding and shardCollection with a hashed _id key",
    )
    tail.add_argument(
        "--readers",
        default="process",
        choices=["thread", "process"],
        help="each stream read in its own process (default: no shared GIL) or thread",
    )
    bench.set_defaults(handler=_run_bench)


def _run_bench(args: argparse.Namespace) -> int:
    """Run ``bench``; errors end it with exit code 1 and one line on stderr."""
    try:
        _check_flags(args)
        # $SHARDSTREAM_URI only where a live mode is asked for: set for watch, it must not
        # turn an offline bench into a live one.
        asked = (args.start_at_operation_time, args.since_seconds, args.duration)
        args.uri = resolve_uri(args, URI, use_env=any(flag is not None for flag in asked))
    except ShardstreamError as exc:
        print(f"shardstream bench: error: {exc}", file=sys.stderr)
        return 1
    if args.uri and args.duration is not None:
        return _run_latency(args)
    if args.uri:
        return _run_live(args)
    try:
        if args.duration is not None:
            raise ConfigurationError(
                f"expected --uri with --duration, got no --uri (nor {URI.file_flag} or {URI.env})"
            )
        if args.start_at_operation_time is not None or args.since_seconds is not None:
            raise ConfigurationError(
                "expected --uri with --start-at-operation-time or --since-seconds, got no --uri "
                f"(nor {URI.file_flag} or {URI.env})"
            )
        for name in ("entries", "shards", "repeats"):
            if getattr(args, name) < 1:
                raise ConfigurationError(f"expected --{name} >= 1, got {getattr(args, name)}")
        if args.workers < 0:
            raise ConfigurationError(f"expected --workers N with N >= 0, got {args.workers}")
        with tempfile.TemporaryDirectory(prefix="shardstream-bench-") as directory:
            shards = _shards(args, Path(directory))
            report = measure(
                shards, args.repeats, workers=args.workers, reference=not args.no_reference
            )
    except ShardstreamError as exc:
        print(f"shardstream bench: error: {exc}", file=sys.stderr)
        return 1
    rates = [Rate(**rate) for rate in report["rates"]]
    print(report["header"])
    print(format_table(rates, rates[0]))
    print(json.dumps(report))
    write_report(args, rates, report)
    return 0


def _run_live(args: argparse.Namespace) -> int:
    # pymongo's client is imported only by the live mode (see shardstream/__init__.py).
    from shardstream.bench.live import format_live_table, measure_live

    try:
        start = (
            None
            if args.start_at_operation_time is None
            else parse_timestamp(args.start_at_operation_time)
        )
        report = measure_live(
            args.uri,
            start_at=start,
            since_seconds=args.since_seconds,
            events=args.events,
            tailer=args.tailer,
        )
    except ShardstreamError as exc:
        print(f"shardstream bench: error: {redact_text(str(exc), args.uri)}", file=sys.stderr)
        return 1
    runs = [(name, report[name]) for name in ("shardstream", "native")]
    rates = [
        Rate(name, run["events_per_s"], 0.0, run["events"], "events")
        for name, run in runs
        if run["available"]
    ]
    write_report(args, rates, report)  # first: the files are kept if stdout is closed early
    print(format_live_table(report))
    print(json.dumps(report))
    return 0


def _run_latency(args: argparse.Namespace) -> int:
    # pymongo's client is imported only by the live modes (see shardstream/__init__.py).
    from shardstream.bench.latency import measure_from_args
    from shardstream.bench.latency_report import format_latency_table, plot_latency

    try:
        report = measure_from_args(args)
    except ShardstreamError as exc:
        print(f"shardstream bench: error: {redact_text(str(exc), args.uri)}", file=sys.stderr)
        return 1
    # The files first: they are kept if stdout is closed early.
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.plot and not plot_latency(report, args.plot):
        print("shardstream bench: no plot: matplotlib is not installed", file=sys.stderr)
    print(format_latency_table(report))
    print(json.dumps(report))
    return 0


def _check_flags(args: argparse.Namespace) -> None:
    """What every mode needs of its flags, checked before minutes of measuring."""
    for flag in ("since_seconds", "duration", "write_rate"):
        value = getattr(args, flag)
        if value is not None and not math.isfinite(value):
            raise ConfigurationError(
                f"expected --{flag.replace('_', '-')} as a finite number, got {value}"
            )
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is None:
            continue
        if Path(path).is_dir():
            raise ConfigurationError(f"expected {flag} as a file path, got the directory {path!r}")
        if not Path(path).parent.is_dir():
            raise ConfigurationError(
                f"expected {flag} in an existing directory, got {path!r} (no such directory)"
            )


def _shards(args: argparse.Namespace, directory: Path) -> Shards:
    if args.shard:
        shards = []
        for shard in args.shard:
            name, sep, path = shard.partition("=")
            if not sep or not name or not path:
                raise ConfigurationError(f"expected --shard NAME=PATH, got {shard!r}")
            shards.append((name, path))
        return shards
    generated = []
    for seed in range(args.shards):
        path = directory / f"shard{seed}.bson"
        path.write_bytes(oplog_bytes(args.entries, seed=seed))
        generated.append((f"shard{seed}", str(path)))
    return generated
