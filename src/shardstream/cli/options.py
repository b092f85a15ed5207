"""The change-stream flags ``replay``, ``watch`` and ``ingest`` share, and their parsers."""

from __future__ import annotations

import argparse

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenError
from shardstream.resume_token import ResumeTokenData, decode_token, decode_token_document
from shardstream.resume_token.token_json import loads
from shardstream.transform import ChangeStreamOptions


def add_stream_options(parser: argparse.ArgumentParser) -> None:
    """The change-stream flags ``replay``, ``watch`` and ``ingest`` share."""
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


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """``--json canonical|relaxed``: the Extended JSON mode of the events written."""
    parser.add_argument(
        "--json",
        choices=["canonical", "relaxed"],
        default="canonical",
        help="Extended JSON mode: canonical (every type kept, the default) or relaxed "
        "(plain JSON numbers and ISO dates, as data tools prefer)",
    )


def options_from_args(args: argparse.Namespace) -> ChangeStreamOptions:
    """Build the stream options the flags describe."""
    return ChangeStreamOptions(
        db=args.db,
        coll=args.coll,
        show_expanded_events=args.show_expanded_events,
        show_system_events=args.show_system_events,
        show_migration_events=args.show_migration_events,
        show_raw_update_description=args.show_raw_update_description,
        server_version=_parse_server_version(args.server_version),
        token_version=args.token_version,
        start_at_operation_time=(
            parse_timestamp(args.start_at_operation_time) if args.start_at_operation_time else None
        ),
        resume_after=parse_token_argument(args.resume_after) if args.resume_after else None,
        start_after=parse_token_argument(args.start_after) if args.start_after else None,
    )


def _parse_server_version(text: str) -> tuple[int, int]:
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
