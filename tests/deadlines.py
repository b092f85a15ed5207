"""Waits that fail with a message instead of hanging, and never assert a duration.

A loop that waits for a stream to drain, or a call that should return once something
happens, is bounded by a deadline far beyond the time it needs: meeting it says nothing
about speed (that is measured in benchmarks/), missing it is a bug, reported by name
rather than as a hung run. pytest-timeout (pyproject.toml) is the backstop behind these.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DRAIN_S = 30.0  # far above any drain in the suite: a loaded CI machine still meets it


class Deadline:
    """A bound on a polling loop: call :meth:`check` on every pass."""

    def __init__(self, what: str, seconds: float = DRAIN_S) -> None:
        self._what = what
        self._seconds = seconds
        self._end = time.monotonic() + seconds

    def check(self, progress: object = None) -> None:
        """Fail naming what was awaited (and ``progress``, when given) once the time is up."""
        if time.monotonic() > self._end:
            detail = f"; {progress}" if progress is not None else ""
            raise AssertionError(f"{self._what}: not done after {self._seconds} s{detail}")


def returns_within(call: Callable[[], T], what: str, seconds: float = DRAIN_S) -> T:
    """Run ``call`` on a daemon thread; its result, its error, or a failure naming ``what``.

    For a blocking call (a close, a driver's getMore) that must return once something
    happens: when it does not, the test fails after ``seconds`` instead of hanging (the
    thread is left behind, a daemon, ended with the process).
    """
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(call())
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="test-deadline", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"{what}: the call had not returned after {seconds} s")
    if errors:
        raise errors[0]
    return results[0]
