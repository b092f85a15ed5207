"""Sync: the run's state, and the requests that change it (pause, resume, commit).

A sync is in one state at a time, mongosync's names so a runbook carries over:

- ``COPYING``: the initial copy; ``STREAMING``: applying the change stream;
- ``PAUSED``: stopped between batches on request, its checkpoint kept, until resumed;
- ``COMMITTING``: a commit was asked for: the source's user writes blocked, the rest of
  the stream being applied up to the source's time after the block, then ``verify``;
- ``COMMITTED``: the target holds everything the source committed and is equal to it;
  writes go to the target now (``canWrite``);
- ``FAILED``: the run ended with an error (``error`` says which).

Requests come from other threads (the HTTP API) and are answered at once: refused when the
state does not allow them, otherwise recorded for the run's loop, which acts on them
between batches. A commit that cannot finish returns to ``STREAMING`` with ``error`` set,
so it can be asked for again once the cause is fixed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

COPYING: Final = "COPYING"
STREAMING: Final = "STREAMING"
PAUSED: Final = "PAUSED"
COMMITTING: Final = "COMMITTING"
COMMITTED: Final = "COMMITTED"
FAILED: Final = "FAILED"
STATES: Final = (COPYING, STREAMING, PAUSED, COMMITTING, COMMITTED, FAILED)


class RequestRefused(Exception):
    """A request the sync's state does not allow now (HTTP 409); the message says why."""


class SyncControl:
    """The state of one run, changed by the run itself and by requests (thread-safe)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._state = COPYING
        self._error: str | None = None
        self._commit_asked = False

    @property
    def state(self) -> str:
        """The current state (one of :data:`STATES`)."""
        with self._changed:
            return self._state

    @property
    def error(self) -> str | None:
        """Why the run failed, or why the last commit did not finish (None: no error)."""
        with self._changed:
            return self._error

    # -- requests (any thread) -----------------------------------------------------------

    def pause(self) -> str:
        """Pause after the batch in flight; return the new state."""
        return self._request(STREAMING, PAUSED, "pause")

    def resume(self) -> str:
        """Resume a paused sync; return the new state."""
        return self._request(PAUSED, STREAMING, "resume")

    def commit(self) -> str:
        """Ask the run to commit (the run blocks writes and catches up); return the state."""
        return self._request(STREAMING, COMMITTING, "commit")

    def _request(self, allowed: str, new: str, verb: str) -> str:
        with self._changed:
            if self._state != allowed:
                raise RequestRefused(
                    f"expected a sync in state {allowed} to {verb}, but it is {self._state}"
                    + (" (the initial copy must finish first)" if self._state == COPYING else "")
                )
            self._state = new
            if new == COMMITTING:
                self._commit_asked, self._error = True, None
            self._changed.notify_all()
            return new

    # -- the run's side ----------------------------------------------------------------

    def enter(self, state: str) -> None:
        """The run moved to ``state`` (``COPYING`` or ``STREAMING`` as its phases start)."""
        with self._changed:
            self._state = state
            self._changed.notify_all()

    def take_commit(self) -> bool:
        """Whether a commit was asked for since the last call (the run starts it then)."""
        with self._changed:
            asked, self._commit_asked = self._commit_asked, False
            return asked

    def commit_failed(self, reason: str) -> None:
        """The commit did not finish: back to ``STREAMING``, ``error`` saying why."""
        with self._changed:
            self._state, self._error = STREAMING, reason
            self._changed.notify_all()

    def failed(self, reason: str) -> None:
        """The run ended with an error."""
        with self._changed:
            self._state, self._error = FAILED, reason
            self._changed.notify_all()

    def wait_while_paused(self, stopping: Callable[[], bool], tick: Callable[[], None]) -> None:
        """Return once the sync is not paused (or is stopping), calling ``tick`` about
        once a second meanwhile (the progress keeps measuring the lag)."""
        with self._changed:
            while self._state == PAUSED and not stopping():
                self._changed.wait(timeout=1.0)
                if self._state == PAUSED:
                    self._changed.release()
                    try:
                        tick()
                    finally:
                        self._changed.acquire()

    def wake(self) -> None:
        """Wake :meth:`wait_while_paused` (the run is stopping)."""
        with self._changed:
            self._changed.notify_all()
