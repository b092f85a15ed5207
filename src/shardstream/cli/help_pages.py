"""Where each command's ``--help`` sends its reader next, and ``shardstream --version``.

Every help text ends with a line such as ``Docs: docs/sync.md``: the page of the
repository that explains the command.  A verb's nested commands (``token decode``) share
its page; a verb missing from :data:`DOCS_PAGES` gets the top level's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

DOCS_PREFIX: Final = "Docs: "
TOP_LEVEL_PAGE: Final = "README.md"
DOCS_PAGES: Final[Mapping[str, str]] = {
    "token": "docs/tokens.md",
    "replay": "docs/replay.md",
    "watch": "docs/watch.md",
    "bench": "docs/bench.md",
    "ingest": "docs/lakehouse.md",
    "demo": "docs/lakehouse.md",
    "sync": "docs/sync.md",  # its status|commit|pause|resume|reverse are its positional action
    "verify": "docs/sync.md",
}


class DocsLineFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the docs line is printed as written, never wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(DOCS_PREFIX):
            return indent + text
        return super()._fill_text(text, width, indent)


def add_docs_lines(parser: argparse.ArgumentParser, page: str = TOP_LEVEL_PAGE) -> None:
    """End the help of ``parser`` and of every command under it with its docs page."""
    parser.epilog = DOCS_PREFIX + page
    parser.formatter_class = DocsLineFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                add_docs_lines(command, DOCS_PAGES.get(name, page))


def installed_version() -> str:
    """The installed distribution's version, else the package's own ``__version__``."""
    # Imported here: only --version needs it, and every other command starts faster.
    from importlib import metadata

    try:
        return metadata.version("shardstream")
    except metadata.PackageNotFoundError:  # run from a source tree that was not installed
        from shardstream import __version__

        return __version__


class PrintVersion(argparse.Action):
    """``--version``: print ``shardstream <version>`` on stdout and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        """Take no value, store nothing (as argparse's own ``version`` action)."""
        kwargs.setdefault("help", "print shardstream's version and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        _namespace: argparse.Namespace,  # argparse passes these positionally; none is needed
        _values: str | Sequence[Any] | None,
        _option_string: str | None = None,
    ) -> None:
        """Print the version (found only now: the lookup costs every other command time)."""
        print(f"shardstream {installed_version()}", file=sys.stdout)
        parser.exit(0)
