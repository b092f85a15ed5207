"""How a live oplog tailer reacts to each driver error, and its retry budget.

pymongo never retries a getMore (testing.md §5), so every failure of a tailing cursor
reaches the tailer, which must decide: reopen the cursor from the last ``ts`` it saw
(network errors, elections, killed cursors, timeouts), report lost history (the oplog
rolled over past the position), or give up (anything else, e.g. ``Unauthorized``).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Final

from bson.timestamp import Timestamp
from pymongo.errors import (
    ConnectionFailure,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from shardstream.errors import ChangeStreamHistoryLost, ConfigurationError, OplogError

# Codes after which reopening the cursor can succeed: network and host errors (6, 7, 89,
# 9001), elections and shutdown (91, 189, 10107, 11600, 11602, 13435, 13436), a cursor the
# server killed or lost (43, 175, 237), time limits (50, 262), stale routing (13388, 150,
# 63) and RetryChangeStream (234). Mirrors the driver change-stream spec's resumable list.
RESUMABLE_CODES: Final = frozenset(
    {6, 7, 43, 50, 63, 89, 91, 133, 150, 175, 189, 234, 237, 262, 9001, 10107, 11600, 11602}
    | {13388, 13435, 13436}
)
# CappedPositionLost: the cursor's position was truncated away; ChangeStreamHistoryLost.
HISTORY_LOST_CODES: Final = frozenset({136, 286})
# A refused login never heals by retrying. pymongo reports it inside the server-selection
# timeout (the server is marked Unknown with the auth error as its cause), as text only.
_AUTH_FAILURES: Final = ("AuthenticationFailed", "'code': 18,")


class Verdict(enum.Enum):
    """What to do about one failure of the tailing cursor."""

    RETRY = "retry"
    HISTORY_LOST = "history lost"
    FATAL = "fatal"


def classify(exc: BaseException) -> Verdict:
    """Decide how the tailer handles ``exc`` (raised by a find, getMore or hello).

    Network errors, not-primary errors and timeouts are all ``ConnectionFailure``
    subclasses in pymongo (``AutoReconnect``, ``NotPrimaryError``, ``NetworkTimeout``);
    server errors are ``OperationFailure`` with a code and possibly error labels.
    """
    if isinstance(exc, OperationFailure):
        if exc.code in HISTORY_LOST_CODES:
            return Verdict.HISTORY_LOST
        if exc.code in RESUMABLE_CODES or exc.has_error_label("ResumableChangeStreamError"):
            return Verdict.RETRY
        if exc.has_error_label("RetryableReadError"):
            return Verdict.RETRY
        return Verdict.FATAL
    if isinstance(exc, ServerSelectionTimeoutError) and any(
        marker in str(exc) for marker in _AUTH_FAILURES
    ):
        return Verdict.FATAL
    if isinstance(exc, ConnectionFailure):
        return Verdict.RETRY
    if isinstance(exc, PyMongoError) and exc.has_error_label("ResumableChangeStreamError"):
        return Verdict.RETRY
    return Verdict.FATAL


def retry_cause(
    exc: PyMongoError, where: str, last_ts: Timestamp | None, start: Timestamp, redacted: str
) -> str:
    """The cause a tailer logs as it reopens its cursor after ``exc`` (``redacted``: its
    text without credentials; ``where``: the shard; ``last_ts``: the last entry delivered).

    Raises:
        ChangeStreamHistoryLost: the oplog rolled over past the tailer's position.
        OplogError: a failure no reopening heals.
    """
    verdict = classify(exc)
    if verdict is Verdict.HISTORY_LOST:
        raise ChangeStreamHistoryLost(
            f"{where}: the oplog rolled over past the tailer's position "
            f"(last ts {last_ts!r}, start {start!r}): {redacted}"
        ) from exc
    if verdict is Verdict.FATAL:
        raise OplogError(f"{where}: {redacted}") from exc
    return f"{type(exc).__name__}: {redacted}"


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and how patiently, a tailer reopens a failed cursor.

    Attributes:
        max_retries: Consecutive failures tolerated (the count resets after any read
            that succeeds); one more is an ``OplogError``.
        initial_backoff: Seconds to wait before the first retry.
        max_backoff: The cap on the doubling wait.
    """

    max_retries: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        """Reject negative budgets."""
        if self.max_retries < 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise ConfigurationError(f"expected a non-negative retry policy, got {self!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return float(min(self.max_backoff, self.initial_backoff * 2 ** max(0, attempt - 1)))
