"""Running a page's example steps: order, failures, timeouts, and the page environment."""

from __future__ import annotations

import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.docs.example_blocks import Step, page_examples
from tests.docs.example_fixtures import OPLOG_START, PageEnvironment, needs_clusters
from tests.docs.example_runner import run_page, run_step


def _steps(text: str) -> list[Step]:
    """The steps of a page written with ''' for the fence, so this file's source stays readable."""
    page = textwrap.dedent(text).lstrip("\n").replace("'''", "```")
    examples = page_examples(page, "page.md")
    assert examples.refusals == []
    return examples.steps


def _run(text: str, tmp_path: Path, **kwargs: float) -> list[str | None]:
    """Each step's failure (None: it passed), the steps run in one environment."""
    with PageEnvironment(tmp_path, clusters=False) as environment:
        return [run_step(step, environment, **kwargs).failure for step in _steps(text)]


def test_a_later_command_reads_what_an_earlier_one_wrote(tmp_path: Path) -> None:
    failures = _run(
        """
        '''console
        $ echo written > note.txt
        '''
        Later on the page:
        '''console
        $ cat note.txt
        written
        '''
        """,
        tmp_path,
    )
    assert failures == [None, None]


def test_a_failing_command_reports_its_exit_code_and_stderr(tmp_path: Path) -> None:
    (failure,) = _run(
        "'''console\n$ echo checking; echo 'disk on fire' >&2; exit 3\n'''\n", tmp_path
    )
    assert failure is not None
    assert failure.startswith("page.md:2: ")
    assert "exit code 3" in failure
    assert "disk on fire" in failure


def test_output_that_lacks_a_shown_line_fails_naming_it(tmp_path: Path) -> None:
    (failure,) = _run("'''console\n$ echo 'one two'\none ... three\n'''\n", tmp_path)
    assert failure is not None
    assert "'one ... three'" in failure
    assert "one two" in failure  # what it printed instead


def test_a_python_block_is_checked_against_its_output_block(tmp_path: Path) -> None:
    page = """
        '''python
        import sys
        print("to stdout")
        print("to stderr", file=sys.stderr)
        '''
        '''text
        # output
        to stdout
        to stderr
        '''
        '''python
        print("something else")
        '''
        '''text
        # output
        the promised line
        '''
        """
    passed, failed = _run(page, tmp_path)
    assert passed is None
    assert failed is not None
    assert "'the promised line'" in failed


def test_the_page_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDSTREAM_URI", "mongodb://somewhere-else/")
    steps = _steps(
        """
        '''console
        $ command -v python; echo "[${SHARDSTREAM_URI-unset}] $EXAMPLES_DIR"; ls
        shard0.bson
        shard1.bson
        shard2.bson
        $ shardstream replay --shard shard0=shard0.bson --shard shard1=shard1.bson \\
            --shard shard2=shard2.bson --db shop --coll orders
        ..."operationType": "insert"...
        '''
        """
    )
    with PageEnvironment(tmp_path, clusters=False) as environment:
        environment_line, replay = (run_step(step, environment) for step in steps)
    assert (environment_line.failure, replay.failure) == (None, None)
    python, variables = environment_line.output.splitlines()[:2]
    assert python == str(Path(sys.executable).parent / "python")
    assert variables == f"[unset] {tmp_path}"


def test_steps_stop_at_the_first_failure(tmp_path: Path) -> None:
    steps = _steps("'''console\n$ false\n$ touch reached\n'''\n")
    with PageEnvironment(tmp_path, clusters=False) as environment:
        failure = run_page(steps, environment)
    assert failure is not None
    assert failure.startswith("page.md:2: ")
    assert not (tmp_path / "reached").exists()


def test_a_command_past_its_timeout_is_stopped_with_its_children(tmp_path: Path) -> None:
    started = time.monotonic()
    (failure,) = _run("'''console\n$ (sleep 30; echo late) | cat\n'''\n", tmp_path, timeout=1.0)
    assert failure is not None
    assert "still running after 1 s" in failure
    assert time.monotonic() - started < 20


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for its parent counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in {"Z", "X"}


def test_what_a_command_leaves_running_stops_with_the_page(tmp_path: Path) -> None:
    (failure,) = _run(
        "'''console\n$ sleep 300 >/dev/null 2>&1 & echo $! > sleeper.pid\n'''\n", tmp_path
    )
    assert failure is None
    pid = int((tmp_path / "sleeper.pid").read_text())
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:  # bounded by the deadline
        time.sleep(0.05)
    assert _gone(pid)


@pytest.mark.parametrize(
    ("sources", "needed"),
    [
        (["shardstream replay --shard a=shard0.bson"], False),
        (["shardstream token decode 82..."], False),
        (['import os\nuri = os.environ["SHARDSTREAM_URI"]\n'], True),
        (["echo $SHARDSTREAM_TARGET_URI"], True),
        (["shardstream watch --max-events 1"], True),
        (["shardstream  verify"], True),
    ],
)
def test_clusters_start_only_for_pages_that_use_them(sources: list[str], needed: bool) -> None:
    assert needs_clusters(sources) is needed


def test_the_clusters_serve_the_simulated_run_and_stop_with_the_page(tmp_path: Path) -> None:
    steps = _steps(
        f"""
        '''console
        $ shardstream watch --start-at-operation-time {OPLOG_START} --max-events 3
        ..."operationType": ...
        ..."operationType": ...
        ..."operationType": ...
        $ test "$SHARDSTREAM_SOURCE_URI" = "$SHARDSTREAM_URI"
        $ test -n "$SHARDSTREAM_TARGET_URI" && test "$SHARDSTREAM_TARGET_URI" != "$SHARDSTREAM_URI"
        '''
        """
    )
    with PageEnvironment(tmp_path, clusters=True) as environment:
        failures = [run_step(step, environment).failure for step in steps]
        uris = environment.variables()
    assert failures == [None, None, None]
    for name in ("SHARDSTREAM_SOURCE_URI", "SHARDSTREAM_TARGET_URI"):
        host, port = uris[name].removeprefix("mongodb://").rstrip("/").split(":")
        with pytest.raises(OSError):  # noqa: PT011 - refused, whichever OSError it is
            socket.create_connection((host, int(port)), timeout=5).close()
