"""A sync on a background thread for tests, and a bounded poll for what it does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from shardstream.cluster_sync import SyncResult

WAIT_S = 60.0


def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded by the deadline
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class SyncThread:
    """``run`` (a whole sync) on a thread, with its result or error kept for the test."""

    def __init__(self, run: Callable[[], SyncResult]) -> None:
        self.result: SyncResult | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(run,), name="test-sync", daemon=True
        )
        self._thread.start()

    def _run(self, run: Callable[[], SyncResult]) -> None:
        try:
            self.result = run()
        except BaseException as exc:  # handed to the test
            self.error = exc

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float = WAIT_S, what: str = "the sync did not stop") -> SyncResult:
        """Wait for the sync's end and return its result (re-raising its error)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), what
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result
