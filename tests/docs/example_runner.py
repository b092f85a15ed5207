"""Run a page's example steps in order and say what went wrong, as a reader would see it.

A console command runs with ``bash -c`` and a python block as a script with this
interpreter, both in the page's directory with its environment
(:class:`~tests.docs.example_fixtures.PageEnvironment`).  A step fails when it exits
non-zero, outlives its timeout, or its output lacks a shown line
(:func:`~tests.docs.shown_output.first_missing_line`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from tests.docs.example_blocks import Step
from tests.docs.example_fixtures import PageEnvironment
from tests.docs.shown_output import first_missing_line

COMMAND_TIMEOUT_S: Final = 60.0
SCRIPT_TIMEOUT_S: Final = 120.0
SHOWN_TAIL_LINES: Final = 40  # of a failed step's output, in the failure message


@dataclass(frozen=True)
class Outcome:
    """What one step did: its output (stdout and stderr, interleaved) and its exit code."""

    output: str
    exit_code: int | None  # None: killed at its timeout
    failure: str | None  # None: the step did what its page says


def run_step(step: Step, environment: PageEnvironment, timeout: float | None = None) -> Outcome:
    """Run ``step`` in ``environment``; ``timeout`` overrides the default for its kind."""
    if step.kind == "console":
        argv = ["bash", "-c", step.source]
        limit = COMMAND_TIMEOUT_S if timeout is None else timeout
    else:
        # A hidden file in the page's directory: a script imports modules the page wrote
        # there, and an `ls` in a later command does not list it.
        script = environment.directory / f".example-{step.where.rsplit(':', 1)[-1]}.py"
        script.write_text(step.source)
        argv = [sys.executable, script.name]
        limit = SCRIPT_TIMEOUT_S if timeout is None else timeout
    # Its own process group, so a timeout (and the page's end) stops what it started too.
    with subprocess.Popen(
        argv,
        cwd=environment.directory,
        env=environment.variables(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        environment.process_groups.append(process.pid)
        try:
            output, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return Outcome(output, None, _failure(step, output, f"still running after {limit:g} s"))
    if process.returncode != 0:
        return Outcome(
            output, process.returncode, _failure(step, output, f"exit code {process.returncode}")
        )
    missing = None if step.shown is None else first_missing_line(step.shown, output)
    if missing is not None:
        verdict = f"the output lacks the shown line {missing!r} (or has it out of order)"
        return Outcome(output, 0, _failure(step, output, verdict))
    return Outcome(output, 0, None)


def run_page(steps: Iterable[Step], environment: PageEnvironment) -> str | None:
    """Run ``steps`` in order up to the first failure; return its message, or None."""
    for step in steps:
        failure = run_step(step, environment).failure
        if failure is not None:
            return failure  # later steps may need what this one should have made
    return None


def _failure(step: Step, output: str, verdict: str) -> str:
    lines = output.splitlines()
    tail = lines[-SHOWN_TAIL_LINES:]
    cut = f"[... {len(lines) - len(tail)} earlier lines]\n" if len(lines) > len(tail) else ""
    shown = "$ " + step.source if step.kind == "console" else step.source.rstrip()
    return (
        f"{step.where}: the {step.kind} example failed: {verdict}\n{shown}\n"
        f"--- its output (stdout and stderr) ---\n{cut}" + "\n".join(tail)
    )
