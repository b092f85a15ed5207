"""Command line: parses arguments, calls the public API, writes JSON lines.

Subcommands (verbs), each help text ending with the docs page to read (``help_pages``):
    shardstream token decode [TOKEN ...]   decode hex tokens or token documents
    shardstream token encode [JSON ...]    encode decoded-token JSON back to {_data, _typeBits}
    shardstream replay PATH [options]      oplog file -> change events (see replay --help)
    shardstream watch URI [options]        a live cluster's merged change stream
    shardstream bench [options]            replay or live throughput (ours vs native watch())
    shardstream ingest --table PATH ...    stream into a Delta change log + mirror (Spark)
    shardstream sync --source URI --target URI   replicate a cluster into another one
    shardstream sync status|commit|pause|resume|reverse   a running sync's API (--api-port)
    shardstream verify --source URI --target URI compare source and target collections
    shardstream demo [--no-spark|--sync]   simulated 3-shard cluster -> Spark -> Delta, checked
                                           (--sync: served live, synced into an emulated one)

Input without arguments is read from stdin, one item per line.  Each output
line is one JSON object; an input that fails writes ``{"error": "..."}`` on its
line, processing goes on, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, BinaryIO, TextIO

from shardstream.cli.bench import add_bench_parser
from shardstream.cli.help_pages import PrintVersion, add_docs_lines
from shardstream.cli.ingest import add_ingest_parser
from shardstream.cli.options import refuse_empty_values
from shardstream.cli.replay import add_replay_parser
from shardstream.cli.sync import add_sync_parsers
from shardstream.cli.watch import add_watch_parser
from shardstream.errors import ResumeTokenError, ShardstreamError
from shardstream.resume_token import encode_token
from shardstream.resume_token.token_json import (
    dumps,
    token_data_from_document,
    token_data_to_document,
)
from shardstream.resume_token.token_text import parse_json_object, parse_token_text

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a writer killed by a closed pipe exits with


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    verb: argparse.ArgumentParser | None = getattr(args, "verb_parser", None)
    if verb is not None:
        try:
            refuse_empty_values(verb, args)
        except ShardstreamError as exc:
            print(f"{verb.prog}: error: {exc}", file=sys.stderr)
            return 1
    try:
        return handler(args)
    except BrokenPipeError:
        # The reader went away (``shardstream replay ... | head``): stop quietly, as a
        # pipeline's writer does.  Output still buffered would fail again at exit, so
        # stdout goes to /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


@functools.cache
def _build_parser() -> argparse.ArgumentParser:
    # Built once per process: parse_args leaves the parser as it was, and building it
    # (every verb's options, their help translated) took ~20 ms, more than a short replay.
    parser = argparse.ArgumentParser(
        prog="shardstream",
        description="mongos-identical change streams from every shard's oplog, in parallel.",
    )
    parser.add_argument("--version", action=PrintVersion)
    commands = parser.add_subparsers(title="commands")
    token = commands.add_parser("token", help="decode or encode resume tokens")
    token_commands = token.add_subparsers(title="token commands")
    decode = token_commands.add_parser(
        "decode",
        help="decode resume tokens (hex _data or {_data, _typeBits} Extended JSON)",
    )
    decode.add_argument("tokens", nargs="*", metavar="TOKEN", help="default: one per stdin line")
    decode.set_defaults(handler=_run_token_decode)
    encode = token_commands.add_parser(
        "encode", help="encode decoded-token JSON objects (version required) back to tokens"
    )
    encode.add_argument("documents", nargs="*", metavar="JSON", help="default: stdin lines")
    encode.set_defaults(handler=_run_token_encode)
    add_replay_parser(commands)
    add_watch_parser(commands)
    add_bench_parser(commands)
    add_ingest_parser(commands)
    add_sync_parsers(commands)
    demo = commands.add_parser(
        "demo",
        help="ingest a simulated 3-shard cluster with Spark into Delta tables and check them",
    )
    kind = demo.add_mutually_exclusive_group()
    kind.add_argument(
        "--no-spark",
        action="store_true",
        help="merge the oplogs in pure Python and check the data (no Spark needed)",
    )
    kind.add_argument(
        "--sync",
        action="store_true",
        help="serve the simulated cluster live (wire emulator), sync it into an emulated "
        "cluster, verify, and check the target against the simulator's true data",
    )
    demo.set_defaults(handler=_run_demo)
    for name, verb in commands.choices.items():
        if name != "token":  # token verbs report each bad input on its own line and go on
            verb.set_defaults(verb_parser=verb)
    add_docs_lines(parser)  # last: every command, nested ones too, exists by now
    return parser


def _inputs(arguments: Sequence[str], stdin: TextIO) -> Iterable[str | ResumeTokenError]:
    """The arguments, else stdin's non-blank lines (a line that is not UTF-8: its error)."""
    if arguments:
        yield from arguments
        return
    binary: BinaryIO | None = getattr(stdin, "buffer", None)
    if binary is None:  # a text stream without bytes under it (tests' io.StringIO)
        yield from (line.strip() for line in stdin if line.strip())
        return
    for number, raw in enumerate(binary, start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield ResumeTokenError(
                f"expected UTF-8 text on stdin line {number}, got the byte "
                f"0x{raw[exc.start]:02x} at column {exc.start + 1}"
            )
            continue
        if line:
            yield line


def _run_each(items: Iterable[str | ResumeTokenError], convert: Callable[[str], Any]) -> int:
    status = 0
    for item in items:
        try:
            if isinstance(item, ResumeTokenError):
                raise item
            line = dumps(convert(item))
        except ShardstreamError as exc:
            line = dumps({"error": str(exc)})
            status = 1
        print(line, flush=True)
    return status


def _run_token_decode(args: argparse.Namespace) -> int:
    return _run_each(_inputs(args.tokens, sys.stdin), decode_one)


def _run_token_encode(args: argparse.Namespace) -> int:
    return _run_each(_inputs(args.documents, sys.stdin), encode_one)


def decode_one(text: str) -> dict[str, Any]:
    """Decode one CLI input (hex ``_data`` or a token document) to its JSON document."""
    return token_data_to_document(parse_token_text(text, "token"))


def encode_one(text: str) -> dict[str, Any]:
    """Encode one decoded-token JSON object to ``{_data[, _typeBits]}``."""
    document = parse_json_object(text, "token", "a decoded-token object in Extended JSON")
    return encode_token(token_data_from_document(document)).to_document()


def _run_demo(args: argparse.Namespace) -> int:
    # Imported here: only the demo needs the simulator.
    from shardstream.cli.demo import run_demo, run_spark_demo

    if args.sync:
        from shardstream.cli.demo_sync import run_sync_demo

        return run_sync_demo(sys.stdout)
    if args.no_spark:
        return run_demo(sys.stdout)
    return run_spark_demo(sys.stdout)
