"""Every example in README.md and docs/*.md runs, and shows what it really prints.

The convention pages are written to:

Examples are fenced code blocks with the info string ``console`` or ``python``.

- ``console``: each line starting with ``$ `` is a command (a line ending in ``\\``
  continues on the next one); the lines after it, up to the next ``$ `` line, are its
  shown output. Each command runs with ``bash -c`` (so ``cd`` and ``export`` last for that
  command only; a pipeline's exit code is its last command's) and must exit 0 within 60 s.
- ``python``: the block runs as a script (``python .example-LINE.py``, the file hidden in
  the page's directory) and must exit 0 within 120 s. A ``text`` block right after it
  (blank lines between are fine) whose first line is ``# output`` holds its shown output.
- Shown output is checked against stdout and stderr together: its non-empty lines must
  appear, in order, among the output's lines (other lines may come between), leading and
  trailing whitespace ignored; ``...`` inside a line matches any text, and a line of just
  ``...`` marks skipped lines for the reader. A command or script with no shown output is
  only checked for its exit code.
- ``<!-- example: skip REASON -->`` on the line right above a fence skips that example
  (reported as a skipped test with REASON); REASON may not be empty, and the marker may
  only stand above a ``console`` or ``python`` block.
- Refused (the test fails naming file:line): fences with the info string ``sh``, ``bash``,
  ``shell``, ``shell-session``, ``pycon`` or none at all, and fences that never close. Use
  ``console``/``python`` for examples and ``text`` (or the data's language: ``json``,
  ``sql``, ``toml``, ...) for anything not run; those are not run.

The environment (tests/docs/example_fixtures.py): a page's examples run in order, in one
fresh directory per page (a later example may read what an earlier one wrote), which holds

- ``shard0.bson``, ``shard1.bson``, ``shard2.bson``: the oplogs of a simulated 3-shard
  cluster (seed 7, 300 operations: inserts, updates, deletes, multi-shard transactions,
  chunk migrations, DDL), the same bytes on every run, e.g.
  ``shardstream replay --shard shard0=shard0.bson --shard shard1=shard1.bson
  --shard shard2=shard2.bson``;

with these environment variables:

- ``PATH``: the ``bin`` directory of the Python running the tests first (``shardstream``,
  ``python``); ``COLUMNS=80``; ``PYTHONUNBUFFERED=1``; no other ``SHARDSTREAM_*`` variable;
- ``EXAMPLES_DIR``: the page's directory;
- ``SHARDSTREAM_URI`` and ``SHARDSTREAM_SOURCE_URI``: the ``mongodb://`` URI of an emulated
  2-shard cluster holding a whole simulated run (seed 7, 300 operations, database ``shop``:
  ``orders``, ``users``, ``settings``); its shards' oplogs start at cluster time
  ``1767225600,1`` (``watch --start-at-operation-time 1767225600,1`` replays them) and end
  with a no-op;
- ``SHARDSTREAM_TARGET_URI``: an empty emulated 2-shard cluster.

The two clusters are started only for a page whose examples mention ``SHARDSTREAM_`` or
run ``shardstream watch``, ``sync``, ``verify``, ``ingest`` or ``bench``; they, and any
process a command left running (``cmd > log 2>&1 &``), are stopped when the page is done.
A command left running in the background must send its output to a file: the command's
output is read until every process holding it has exited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from tests.docs.example_blocks import PageExamples, page_examples
from tests.docs.example_fixtures import PageEnvironment, needs_clusters
from tests.docs.example_runner import run_page

ROOT: Final = Path(__file__).parents[2]
PAGES: Final = [
    path.relative_to(ROOT).as_posix()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    if path.is_file()
]
# Read once, when the tests are collected: a skipped example is a test case of its own.
EXAMPLES: Final = {page: page_examples((ROOT / page).read_text(), page) for page in PAGES}
SKIPPED: Final = [
    pytest.param(reason, id=where)
    for examples in EXAMPLES.values()
    for where, reason in examples.skipped
]


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_are_examples_or_plainly_not(page: str) -> None:
    refusals = EXAMPLES[page].refusals
    if refusals:
        pytest.fail(f"{len(refusals)} refused blocks:\n" + "\n".join(refusals), pytrace=False)


@pytest.mark.timeout(900)  # every step has its own timeout; a page may have many
@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run_as_shown(page: str, tmp_path: Path) -> None:
    examples: PageExamples = EXAMPLES[page]
    if not examples.steps:
        pytest.skip(f"{page} has no example to run")
    clusters = needs_clusters([step.source for step in examples.steps])
    with PageEnvironment(tmp_path, clusters=clusters) as environment:
        failure = run_page(examples.steps, environment)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


@pytest.mark.parametrize("reason", SKIPPED)
def test_skipped_example(reason: str) -> None:
    pytest.skip(reason)
