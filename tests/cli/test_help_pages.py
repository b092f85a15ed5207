"""``shardstream --version``, and every help text ending with the docs page to read."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata

import pytest

import shardstream
from shardstream.cli import help_pages
from shardstream.cli.main import _build_parser, main

# The pages the documentation is made of: a help text may only send its reader to one.
DOCS_PAGES = {
    "README.md",
    "docs/watch.md",
    "docs/replay.md",
    "docs/tokens.md",
    "docs/lakehouse.md",
    "docs/sync.md",
    "docs/bench.md",
    "docs/emulator.md",
    "docs/reliability.md",
    "docs/design.md",
    "docs/development.md",
}
# Every command line that has a help text of its own, and the page it names.
EXPECTED_PAGES = {
    (): "README.md",
    ("token",): "docs/tokens.md",
    ("token", "decode"): "docs/tokens.md",
    ("token", "encode"): "docs/tokens.md",
    ("replay",): "docs/replay.md",
    ("watch",): "docs/watch.md",
    ("bench",): "docs/bench.md",
    ("ingest",): "docs/lakehouse.md",
    ("demo",): "docs/lakehouse.md",
    ("sync",): "docs/sync.md",
    ("verify",): "docs/sync.md",
}
SYNC_ACTIONS = ("status", "commit", "pause", "resume", "reverse")


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield from _commands(command, (*path, name))


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_version_prints_the_installed_distributions_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"shardstream {metadata.version('shardstream')}\n"


def test_version_falls_back_to_the_package_version(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"shardstream {shardstream.__version__}\n"


def test_version_from_the_console_script_exits_0() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "shardstream", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (
        0,
        f"shardstream {metadata.version('shardstream')}\n",
    )


def test_every_command_with_a_help_text_is_listed_here() -> None:
    assert set(_commands(_build_parser())) == set(EXPECTED_PAGES)


HELP_CASES = [
    *((list(command), page) for command, page in EXPECTED_PAGES.items()),
    *((["sync", action], "docs/sync.md") for action in SYNC_ACTIONS),  # sync's own help
]


@pytest.mark.parametrize(
    ("argv", "page"),
    [pytest.param(argv, page, id=" ".join(["shardstream", *argv])) for argv, page in HELP_CASES],
)
def test_the_help_ends_with_its_docs_page(
    argv: list[str], page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    last_line = _help(argv, capsys).rstrip("\n").splitlines()[-1]
    assert last_line == f"Docs: {page}"
    assert page in DOCS_PAGES


def test_the_docs_line_is_not_wrapped_on_a_narrow_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "12")
    assert _help(["ingest"], capsys).rstrip("\n").splitlines()[-1] == "Docs: docs/lakehouse.md"


def test_a_verb_without_a_page_of_its_own_gets_its_parents() -> None:
    parser = argparse.ArgumentParser(prog="shardstream")
    commands = parser.add_subparsers()
    decode = commands.add_parser("token").add_subparsers().add_parser("decode")
    newverb = commands.add_parser("newverb")
    newverb_step = newverb.add_subparsers().add_parser("step")
    help_pages.add_docs_lines(parser)
    assert decode.epilog == "Docs: docs/tokens.md"
    assert (newverb.epilog, newverb_step.epilog) == ("Docs: README.md", "Docs: README.md")
