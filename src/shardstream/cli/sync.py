"""``shardstream sync``: cluster-to-cluster replication (``verify``: its check, in
:mod:`shardstream.cli.verify`).

Argument parsing and output only; the work is :mod:`shardstream.cluster_sync`.  Ctrl-C
stops a sync after the batch in flight is acknowledged and checkpointed; running the same
command again resumes from that checkpoint.  Credentials in URIs never reach the output.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Final

from shardstream.cli.cluster_scope import add_scope, error_line
from shardstream.cli.options import parse_timestamp
from shardstream.cli.sync_api import add_api_arguments, run_action, serve_until_interrupted
from shardstream.cli.uri_sources import (
    SOURCE,
    TARGET,
    resolve_uri,
)
from shardstream.cli.verify import add_verify_parser, compare
from shardstream.errors import ShardstreamError

# SyncOptions' defaults, repeated for the help text: importing them would load pymongo
# for every command (tests/cluster_sync/test_sync_refusals.py checks they agree; the
# connect timeout's is cluster_scope's).
DEFAULT_IDLE_EXIT_WAIT_S: Final = 30.0
DEFAULT_BATCH: Final = 5000


def add_sync_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``sync`` and ``verify``."""
    sync = commands.add_parser(
        "sync",
        help="replicate a sharded cluster into another cluster (copy, then the change stream)",
        description="Copy every namespace in scope as of the source's majority cluster time "
        "T0, then apply the merged change stream from T0 with idempotent writes, storing the "
        "resume token in the target (shardstream_sync.checkpoints) after each acknowledged "
        "batch. Run again to resume. With --api-port, a progress and control API (commit, "
        "pause, resume); `shardstream sync status|commit|pause|resume` talk to it.",
    )
    add_scope(sync, required=False)  # the wrappers need neither
    sync.add_argument("--sync-id", default="default", help="the checkpoint's key")
    sync.add_argument(
        "--writers", type=int, help="parallel writers (default: the number of source shards)"
    )
    sync.add_argument(
        "--tailer",
        default="thread",
        choices=["thread", "process"],
        help="tail each source shard in a thread or in a child process (default thread; "
        "process takes the tailing off the sync's process, for many shards)",
    )
    sync.add_argument(
        "--no-transactions",
        action="store_true",
        help="apply a source transaction's events as single writes, not as one transaction",
    )
    sync.add_argument(
        "--on-conflict",
        default="fail",
        choices=["fail", "overwrite", "skip"],
        help="on a duplicate key in the target: stop (default), delete the holder, or skip",
    )
    sync.add_argument(
        "--shard-target",
        action="store_true",
        help="shard on the target what is sharded on the source, on the same key: the "
        "collections sharded at T0 before their copy, and shardCollection events "
        "(default: they land unsharded, with a note)",
    )
    sync.add_argument(
        "--batch-size", type=int, default=DEFAULT_BATCH, help="most events per applied batch"
    )
    sync.add_argument(
        "--copy-batch", type=int, default=1000, help="documents per bulk insert of the copy"
    )
    sync.add_argument(
        "--copy-readers",
        type=int,
        default=4,
        metavar="N",
        help="pieces copied at once: collections, or _id ranges of big ones (default 4)",
    )
    sync.add_argument(
        "--copy-range-docs",
        type=int,
        default=50_000,
        metavar="N",
        help="split a collection of at least 2N documents into _id ranges read at once "
        "(default 50000)",
    )
    sync.add_argument(
        "--idle-exit",
        type=float,
        metavar="S",
        help="once no event arrived for S seconds, stop as soon as everything the source "
        "has committed by then is applied (default: run until Ctrl-C)",
    )
    sync.add_argument(
        "--idle-exit-wait",
        type=float,
        default=DEFAULT_IDLE_EXIT_WAIT_S,
        metavar="S",
        help="with --idle-exit: how long to wait for that before stopping behind, exit "
        f"code 1 (default {DEFAULT_IDLE_EXIT_WAIT_S:g})",
    )
    sync.add_argument(
        "--idle-noop-interval",
        type=float,
        metavar="S",
        help="write a no-op (appendOplogNote; needs the clusterManager role) to a source shard "
        "idle for S seconds, so it does not hold other shards' events back (default off)",
    )
    sync.add_argument(
        "--start-at-operation-time",
        type=parse_timestamp,
        metavar="T",
        help="skip the initial copy and stream from cluster time T (SECONDS,INCREMENT): "
        "the target already holds the source's data as of T",
    )
    sync.add_argument(
        "--restart",
        action="store_true",
        help="forget the checkpoint and start with a new initial copy",
    )
    sync.add_argument(
        "--verify",
        action="store_true",
        help="compare source and target once the stream has caught up after a copy (a "
        "report on stderr), and again when the sync stops (its exit code)",
    )
    add_api_arguments(sync)
    sync.set_defaults(handler=_run_sync)
    add_verify_parser(commands)


def _run_sync(args: argparse.Namespace) -> int:
    if args.action is not None:
        return run_action(args)
    try:
        args.source, args.target = resolve_uri(args, SOURCE), resolve_uri(args, TARGET)
    except ShardstreamError as exc:  # our messages hold neither a file's content nor a password
        print(f"shardstream sync: error: {exc}", file=sys.stderr)
        return 1
    if args.source is None or args.target is None:
        print(
            f"shardstream sync: error: expected {SOURCE.alternatives()} and "
            f"{TARGET.alternatives()} (or an action: status, commit, pause, resume)",
            file=sys.stderr,
        )
        return 2
    from shardstream.cluster_sync import NamespaceMap, SyncOptions
    from shardstream.cluster_sync.control_api import ControlApi, read_token_file
    from shardstream.cluster_sync.migration import Migration

    api = None
    try:
        options = SyncOptions(
            source=args.source,
            target=args.target,
            namespaces=NamespaceMap.from_options(
                args.db, args.coll, args.map, args.include, args.exclude
            ),
            sync_id=args.sync_id,
            writers=args.writers,
            tailer=args.tailer,
            transactions=not args.no_transactions,
            on_conflict=args.on_conflict,
            shard_target=args.shard_target,
            batch_size=args.batch_size,
            copy_batch=args.copy_batch,
            copy_readers=args.copy_readers,
            copy_range_docs=args.copy_range_docs,
            idle_exit_s=args.idle_exit,
            idle_exit_wait_s=args.idle_exit_wait,
            connect_timeout_s=args.connect_timeout,
            idle_noop_interval_s=args.idle_noop_interval,
            start_at=args.start_at_operation_time,
            restart=args.restart,
            verify_after_copy=args.verify,
            write_blocking=not args.no_write_blocking,
            commit_timeout_s=args.commit_timeout,
            reversible=args.reversible or args.reverse,
        )
        job = Migration(options, report=lambda line: print(line, file=sys.stderr, flush=True))
        if args.api_port is not None:
            token = None if args.api_token_file is None else read_token_file(args.api_token_file)
            api = ControlApi(job, host=args.api_host, port=args.api_port, token=token).start()
            print(f"sync API at {api.url}", file=sys.stderr, flush=True)
        ended = threading.Event()

        def interrupted(_signum: int, _frame: FrameType | None) -> None:
            if not ended.is_set():
                print("stopping after the batch in flight...", file=sys.stderr, flush=True)
            ended.set()
            job.stop()

        previous = signal.signal(signal.SIGINT, interrupted)
        previous_term = signal.signal(signal.SIGTERM, interrupted)
        try:
            result = job.run(reverse_only=args.reverse)
            if api is not None and job.control.state == "COMMITTED" and not ended.is_set():
                print(
                    "sync committed: the target may take writes; the API stays up until Ctrl-C",
                    file=sys.stderr,
                    flush=True,
                )
                serve_until_interrupted(ended)
        finally:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, previous_term)
        print(
            f"sync stopped: {result.copied:,} documents copied, {result.applied:,} events "
            f"applied, {result.conflicts} conflicts handled; checkpoint {result.token}; "
            f"{result.behind_text()}",
            file=sys.stderr,
        )
        # A sync that stops behind the source fails: a script must not take it for done.
        code = 0 if result.caught_up else 1
        return max(code, compare(args)) if args.verify else code
    except Exception as exc:  # any failure: one line, without credentials
        print(f"shardstream sync: error: {error_line(exc, args)}", file=sys.stderr)
        return 1
    finally:
        if api is not None:
            api.stop()
