"""Where a command's MongoDB URI comes from: its flag, a file, or an environment variable.

A password typed into ``--source mongodb://app:pw@host/`` shows in the process list
(``ps -ef``, ``/proc/PID/cmdline``) to every user of the host.  So each URI a command takes
has two other sources that do not: a file (``--source-file PATH``, best readable by its
owner alone, ``chmod 600``) and an environment variable (``SHARDSTREAM_SOURCE_URI``; a
process's environment is readable only by its owner and root).

The rules, the same for every command (``sync``, ``verify``, ``watch``, ``ingest``,
``bench``):

- at most one of the flag and its file flag: both given is refused, naming both;
- the variable is read only when neither flag is given;
- a file's content is stripped of surrounding whitespace; a file that cannot be read, is
  not UTF-8, is empty, holds more than one line or more than :data:`MAX_URI_FILE_BYTES` is
  refused in one line naming the flag and the path, never the content;
- whatever its source, the URI goes through :func:`~shardstream.cli.options.check_mongodb_uri`;
  one from a file or the environment must also start with ``mongodb://`` or
  ``mongodb+srv://``, and is not echoed, not even redacted, when refused.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NoReturn

from shardstream.cli.options import check_mongodb_uri
from shardstream.errors import ConfigurationError

# A URI is a line; a bigger file is a mistake (or /dev/zero), not read to its end.
MAX_URI_FILE_BYTES: Final = 64 << 10
_SCHEMES: Final = ("mongodb://", "mongodb+srv://")


@dataclass(frozen=True)
class UriSource:
    """One URI a command takes: its flag, its file flag and its environment variable."""

    flag: str  # as messages name it: "--source", or "URI" for watch's positional argument
    dest: str  # the flag's attribute on the parsed arguments
    file_flag: str
    env: str
    what: str  # "the source mongos URI", for the help text

    @property
    def file_dest(self) -> str:
        """The file flag's attribute on the parsed arguments (``--source-file``: source_file)."""
        return self.file_flag.lstrip("-").replace("-", "_")

    def alternatives(self) -> str:
        """``--source (or --source-file PATH, or SHARDSTREAM_SOURCE_URI)``, for messages."""
        return f"{self.flag} (or {self.file_flag} PATH, or {self.env})"


SOURCE: Final = UriSource(
    "--source", "source", "--source-file", "SHARDSTREAM_SOURCE_URI", "the source mongos URI"
)
TARGET: Final = UriSource(
    "--target", "target", "--target-file", "SHARDSTREAM_TARGET_URI", "the target URI"
)
URI: Final = UriSource("--uri", "uri", "--uri-file", "SHARDSTREAM_URI", "the mongos URI")
WATCH_URI: Final = UriSource("URI", "uri", "--uri-file", "SHARDSTREAM_URI", "the mongos URI")


def add_uri_file_argument(
    parser: argparse._ActionsContainer, source: UriSource, *, env_note: str = ""
) -> None:
    """Add ``source``'s file flag to ``parser`` (a parser, a group or an exclusive group).

    ``env_note`` narrows when the variable is read (bench reads it only for a live mode).
    """
    parser.add_argument(
        source.file_flag,
        metavar="PATH",
        help=f"read {source.what} from PATH (surrounding whitespace dropped) instead of "
        f"{source.flag}, which every user of the host can see in ps; with neither, it is "
        f"read from the environment variable {source.env}{env_note}",
    )


def resolve_uri(args: argparse.Namespace, source: UriSource, *, use_env: bool = True) -> str | None:
    """``source``'s URI from its flag, its file flag or (``use_env``) its variable; checked.

    Returns:
        The URI, or None when no source gives one.

    Raises:
        ConfigurationError: both flags given; a file refused (see the module's rules); an
            empty variable; a URI the driver refuses (from a file or the variable, not
            shown). No message holds a file's content or a password.
    """
    given: str | None = getattr(args, source.dest)
    path: str | None = getattr(args, source.file_dest)
    if given is not None and path is not None:
        raise ConfigurationError(f"expected one of {source.flag} and {source.file_flag}, got both")
    if given is not None:
        check_mongodb_uri(source.flag, given)
        return given
    if path is not None:
        uri = read_uri_file(source.file_flag, path)
        _check_unshown(f"the URI in {source.file_flag} {path!r}", uri)
        return uri
    if not use_env or source.env not in os.environ:
        return None
    uri = os.environ[source.env].strip()
    if not uri:
        raise ConfigurationError(f"expected a URI in {source.env}, got an empty value")
    _check_unshown(f"the URI in {source.env}", uri)
    return uri


def _check_unshown(where: str, uri: str) -> None:
    """check_mongodb_uri, quoting nothing, and the scheme required.

    The driver takes a bare word for a host name, so a file holding only the password
    would pass its check and the password would then be named in "cannot reach" errors.
    """
    if not uri.lower().startswith(_SCHEMES):
        raise ConfigurationError(
            f"expected {where} to start with mongodb:// or mongodb+srv://, got a value not "
            "shown here (it may hold a password)"
        )
    check_mongodb_uri(where, uri, show_value=False)


def require_uris(args: argparse.Namespace, *sources: UriSource) -> list[str]:
    """Each of ``sources``' URI (:func:`resolve_uri`); a missing one is a usage error.

    Raises:
        SystemExit: status 2 with the parser's usage, as argparse does for a required
            flag left out, naming every URI missing and where each may come from.
        ConfigurationError: as :func:`resolve_uri`.
    """
    uris = [resolve_uri(args, source) for source in sources]
    missing = [source for source, uri in zip(sources, uris, strict=True) if uri is None]
    if missing:
        usage_error(
            args,
            "the following arguments are required: "
            + ", ".join(source.alternatives() for source in missing),
        )
    return [uri for uri in uris if uri is not None]


def usage_error(args: argparse.Namespace, message: str) -> NoReturn:
    """Exit 2 with the verb's usage and ``message``, as argparse's own errors do."""
    verb: argparse.ArgumentParser | None = getattr(args, "verb_parser", None)
    if verb is None:  # a handler called without main()'s parser
        raise ConfigurationError(message)
    verb.error(message)


def read_uri_file(flag: str, path: str) -> str:
    """The URI in the file ``path``, stripped; ``flag`` names it in errors.

    Read up to a limit, not stat'ed, so ``--uri-file <(pass show mongo/app)`` (a pipe)
    works too.

    Raises:
        ConfigurationError: the file cannot be read, is not UTF-8, is empty (or blank),
            holds more than one line or more than MAX_URI_FILE_BYTES; the message names
            ``flag`` and ``path``, never the content.
    """
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_URI_FILE_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(
            f"expected {flag} to name a readable file, got {path!r}: {reason}"
        ) from None
    if len(data) > MAX_URI_FILE_BYTES:
        raise ConfigurationError(
            f"expected one URI in {flag} {path!r}, got more than {MAX_URI_FILE_BYTES} bytes"
        )
    try:
        uri = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigurationError(
            f"expected UTF-8 text in {flag} {path!r}, got other bytes"
        ) from None
    if not uri:
        raise ConfigurationError(f"expected a URI in {flag} {path!r}, got an empty file")
    lines = len(uri.splitlines())
    if lines > 1:
        raise ConfigurationError(f"expected one line in {flag} {path!r}, got {lines} lines")
    return uri
