"""Sync: a write to the target retried while the target is away, with backoff.

Every write the sync sends is idempotent (replace by key, absolute diffs, delete by key,
DDL that accepts "already so", a checkpoint replaced whole), so a write the target may or
may not have taken before the connection dropped is simply sent again, and the writes of a
lane wait meanwhile, so nothing is reordered.  What counts as "away" is the tailers'
classification (:func:`shardstream.oplog.live.faults.classify`): network errors,
elections and timeouts heal; a refused login or any other server error does not, and is
raised at once.  Every retry is counted (:data:`TARGET_RETRIES`, for the progress API and
its metrics): one count per process, as the target is one per sync process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, TypeVar

from pymongo.errors import PyMongoError

from shardstream.oplog.live.faults import RetryPolicy, Verdict, classify

DEFAULT_RETRY_FOR_S: Final = 300.0
_BACKOFF: Final = RetryPolicy(initial_backoff=0.1, max_backoff=5.0)  # its delays only
_T = TypeVar("_T")


class RetryCount:
    """How many target writes were sent again (the writer lanes retry at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self) -> None:
        """Count one retry."""
        with self._lock:
            self.value += 1


TARGET_RETRIES: Final = RetryCount()


def retrying(call: Callable[[], _T], retry_for_s: float = DEFAULT_RETRY_FOR_S) -> _T:
    """``call()``, called again after each retryable failure for up to ``retry_for_s`` s.

    Raises:
        PyMongoError: a failure that does not heal, or the last one once the time is up.
    """
    deadline = time.monotonic() + retry_for_s
    attempt = 0
    while True:
        try:
            return call()
        except PyMongoError as exc:
            attempt += 1
            delay = _BACKOFF.delay(attempt)
            if classify(exc) is not Verdict.RETRY or time.monotonic() + delay > deadline:
                raise
            TARGET_RETRIES.add()
            time.sleep(delay)
