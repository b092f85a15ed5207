"""What ``shardstream sync`` and ``shardstream verify`` share: the clusters and namespaces
they take (:func:`add_scope`), and a failure as one line without credentials
(:func:`error_line`).
"""

from __future__ import annotations

import argparse
from typing import Final

from shardstream.cli.options import add_namespace_filter_options
from shardstream.cli.uri_sources import SOURCE, TARGET, add_uri_file_argument
from shardstream.errors import ShardstreamError
from shardstream.oplog.redaction import redact_text

# SyncOptions' default, repeated for the help text: importing it would load pymongo for
# every command (tests/cluster_sync/test_sync_refusals.py checks they agree).
DEFAULT_CONNECT_TIMEOUT_S: Final = 10.0


def add_scope(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The two clusters (their URIs, from the command line, a file or the environment), the
    namespaces in scope and how long a first contact may take."""
    parser.add_argument("--source", required=required, metavar="URI", help="the source mongos URI")
    parser.add_argument("--target", required=required, metavar="URI", help="the target URI")
    add_uri_file_argument(parser, SOURCE)  # --source-file, else $SHARDSTREAM_SOURCE_URI
    add_uri_file_argument(parser, TARGET)  # --target-file, else $SHARDSTREAM_TARGET_URI
    parser.add_argument("--db", help="sync only this database")
    parser.add_argument("--coll", help="sync only this collection of --db")
    add_namespace_filter_options(parser)  # --include / --exclude DB.COLL
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="SRC=DST",
        help="rename on the target: a database (shop=shop2) or a collection "
        "(shop.orders=archive.orders); repeatable",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT_S,
        metavar="S",
        help="how long the first contact with each cluster may take "
        f"(default {DEFAULT_CONNECT_TIMEOUT_S:g})",
    )


def error_line(exc: BaseException, args: argparse.Namespace) -> str:
    """``exc`` as the one line a command prints, without either cluster's password."""
    # Imported here: bench.common needs pymongo, which the offline commands never load.
    from shardstream.bench.common import error_text
    from shardstream.oplog.redaction import password_of

    # Our errors say what was expected; a driver error is shown by its code and errmsg.
    text = str(exc) if isinstance(exc, ShardstreamError) else error_text(exc, args.source)
    return redact_text(text, password_of(args.source), password_of(args.target))
