"""``shardstream verify``: are two clusters' namespaces equal?

Argument parsing and output only; the work is :func:`shardstream.cluster_sync.verify`.
Credentials in URIs never reach the output.
"""

from __future__ import annotations

import argparse
import sys

from shardstream.cli.cluster_scope import add_scope, error_line
from shardstream.cli.uri_sources import SOURCE, TARGET, require_uris
from shardstream.errors import ShardstreamError


def add_verify_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``verify`` command."""
    verify = commands.add_parser(
        "verify",
        help="compare source and target collections (count and order-independent hash)",
        description="Per namespace: document count and a hash of the documents' BSON that "
        "does not depend on their order, on both sides, with sample _ids of differences. "
        "Exit code 0 only when everything is equal.",
    )
    add_scope(verify, required=False)  # a URI may come from a file or the environment
    verify.set_defaults(handler=_run_verify)


def _run_verify(args: argparse.Namespace) -> int:
    try:
        args.source, args.target = require_uris(args, SOURCE, TARGET)
    except ShardstreamError as exc:  # our messages hold neither a file's content nor a password
        print(f"shardstream verify: error: {exc}", file=sys.stderr)
        return 1
    try:
        return compare(args)
    except Exception as exc:  # any failure: one line, without credentials
        print(f"shardstream verify: error: {error_line(exc, args)}", file=sys.stderr)
        return 1


def compare(args: argparse.Namespace) -> int:
    """Compare the clusters ``args`` name, print the report; 0 when everything is equal
    (also ``sync --verify``'s last step)."""
    from shardstream.cluster_sync import verify

    report = verify(
        args.source,
        args.target,
        db=args.db,
        coll=args.coll,
        maps=args.map,
        include=args.include,
        exclude=args.exclude,
        connect_timeout_s=args.connect_timeout,
    )
    for line in report.lines():
        print(line)
    return 0 if report.equal else 1
