"""The change-stream flags ``replay``, ``watch`` and ``ingest`` share, and their parsers."""

from __future__ import annotations

import argparse

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError
from shardstream.oplog.redaction import redact_text, redact_uri
from shardstream.resume_token import ResumeTokenData
from shardstream.resume_token.token_text import parse_token_text
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.namespace_filter import scope_filter
from shardstream.transform.options import DEFAULT_SERVER_VERSION, OLDEST_SERVER_VERSION


def add_stream_options(parser: argparse.ArgumentParser) -> None:
    """The change-stream flags ``replay``, ``watch`` and ``ingest`` share."""
    parser.add_argument("--db", help="watch one database (default: the whole cluster)")
    parser.add_argument("--coll", help="watch one collection of --db")
    add_namespace_filter_options(parser)
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


def add_namespace_filter_options(parser: argparse.ArgumentParser) -> None:
    """``--include`` / ``--exclude PATTERN``, repeatable (every command that reads a scope)."""
    for flag, verb in (("--include", "only"), ("--exclude", "never")):
        parser.add_argument(
            flag,
            action="append",
            default=[],
            metavar="DB.COLL",
            help=f"{verb} the namespaces matching this pattern (* matches any characters: "
            "shop.*, *.orders); repeatable; an exclude wins over an include",
        )


def namespace_filter_from_args(
    args: argparse.Namespace,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(include, exclude)`` from the flags, checked (each message names its flag).

    Raises:
        ConfigurationError: a malformed pattern, or ``--include`` with ``--db``.
    """
    scope_filter(
        args.db, args.coll, args.include, args.exclude, names=("--db", "--include", "--exclude")
    )
    return tuple(args.include), tuple(args.exclude)


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
    """Build the stream options the flags describe.

    Raises:
        ConfigurationError, ResumeTokenError: a flag's value is malformed (each message
            names the flag).
    """
    start_at, resume_after, start_after = (
        args.start_at_operation_time,
        args.resume_after,
        args.start_after,
    )
    include, exclude = namespace_filter_from_args(args)
    return ChangeStreamOptions(
        db=args.db,
        coll=args.coll,
        include=include,
        exclude=exclude,
        show_expanded_events=args.show_expanded_events,
        show_system_events=args.show_system_events,
        show_migration_events=args.show_migration_events,
        show_raw_update_description=args.show_raw_update_description,
        server_version=parse_server_version(args.server_version),
        token_version=args.token_version,
        # "is not None": an empty value is an error (main refuses it), never "no start".
        start_at_operation_time=(
            None if start_at is None else parse_timestamp(start_at, "--start-at-operation-time")
        ),
        resume_after=None if resume_after is None else parse_token_argument(resume_after),
        start_after=(
            None if start_after is None else parse_token_argument(start_after, "--start-after")
        ),
    )


def parse_server_version(text: str) -> tuple[int, int]:
    """``8.0`` -> (8, 0): a release line shardstream reproduces (6.0 to the newest known)."""
    major, sep, minor = text.partition(".")
    if not sep or not major.isdecimal() or not minor.isdecimal():
        raise ConfigurationError(f"expected --server-version as X.Y (e.g. 7.0), got {text!r}")
    version = int(major), int(minor)
    if not OLDEST_SERVER_VERSION <= version <= DEFAULT_SERVER_VERSION:
        # Behaviour after the newest release we reproduce is unknown: emulating 8.2 under
        # another name would be a silent guess.
        (a, b), (c, d) = OLDEST_SERVER_VERSION, DEFAULT_SERVER_VERSION
        raise ConfigurationError(
            f"expected --server-version from {a}.{b} to {c}.{d} (the releases whose change "
            f"streams shardstream reproduces), got {text!r}"
        )
    return version


def parse_timestamp(text: str, option: str = "--start-at-operation-time") -> Timestamp:
    """``1700000000,1`` -> Timestamp(1700000000, 1); both parts 0 to 2**32 - 1."""
    seconds, _, increment = text.partition(",")
    try:
        return Timestamp(int(seconds), int(increment))
    except (ValueError, TypeError, OverflowError) as exc:
        raise ConfigurationError(
            f"expected {option} as T,I (seconds,increment, each from 0 to 4294967295), got {text!r}"
        ) from exc


def parse_token_argument(text: str, option: str = "--resume-after") -> ResumeTokenData:
    """A token document in Extended JSON, or a bare ``_data`` hex string.

    The same parser as ``token decode`` and the Spark source's options
    (:func:`shardstream.resume_token.token_text.parse_token_text`).
    """
    return parse_token_text(text, option)


def refuse_empty_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse any option or argument of ``parser`` given as "" (alone or among repeats).

    No shardstream flag means anything when empty: ``--resume-after "$TOKEN"`` with
    ``TOKEN`` unset must fail, not quietly replay the whole oplog (and ``--db ""``,
    ``--table ""``, ``--uri ""``... must not fall back to a default either).

    Raises:
        ConfigurationError: naming the first flag given an empty value.
    """
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if "" in values:
            raise ConfigurationError(f"expected a value for {_flag_name(action)}, got ''")


def _flag_name(action: argparse.Action) -> str:
    if action.option_strings:
        return max(action.option_strings, key=len)  # --resume-after rather than -r
    metavar = action.metavar if isinstance(action.metavar, str) else None
    return metavar or action.dest.upper()


def check_mongodb_uri(option: str, uri: str, *, show_value: bool = True) -> None:
    """Refuse a connection string the driver would refuse or half-ignore, before any work.

    pymongo raises a ValueError for some malformed URIs (a port that is not a number)
    and only warns about options it ignores (``readPreference=zz``, a misspelt name); both become
    one ConfigurationError naming the option, with the URI's password redacted.  With
    ``show_value=False`` (a URI read from a file or the environment, which may hold
    anything, e.g. a bare password) the message does not quote the URI at all.
    """
    # Imported here: pymongo is heavy, and only the verbs that talk to a cluster need it.
    import warnings

    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    from shardstream.oplog.redaction import password_of

    try:
        with warnings.catch_warnings():
            # pymongo's URI validation warns (UserWarning) where it ignores an unknown
            # option or a bad value; a deprecation warning is not a refusal.
            warnings.simplefilter("error", UserWarning)
            # connect=False: parsed and validated only; no socket, thread or SRV lookup.
            MongoClient(uri, connect=False).close()
    except (PyMongoError, ValueError, TypeError, UserWarning) as exc:
        reason = redact_text(" ".join(str(exc).split()))
        password = password_of(uri)
        # The driver's reason, unless the password shows in it (quoted, or a short one
        # inside an ordinary word): then what was expected must do.
        said = f" ({reason:.200})" if reason and not (password and password in reason) else ""
        shown = (
            repr(redact_uri(uri))
            if show_value
            else "a value not shown here (it may hold a password)"
        )
        raise ConfigurationError(
            f"expected {option} as a MongoDB connection string (mongodb:// or mongodb+srv:// "
            "then [user:password@]host[:port][,host...][/db][?options], with user and password "
            f"percent-escaped), got {shown}{said}"
        ) from None
