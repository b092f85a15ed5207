"""Emulator: one-shot faults queued against the next matching command.

A fault is consumed by the first request whose command name matches; the node that
received it then acts it out instead of (or before) answering normally.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hangup:
    """Close the connection without replying (pymongo raises ``AutoReconnect``)."""


@dataclass(frozen=True)
class Stall:
    """Delay the reply by ``seconds`` (interrupted early when the server stops)."""

    seconds: float


@dataclass(frozen=True)
class ErrorReply:
    """Answer with ``ok: 0`` and the given error fields.

    Attributes:
        code: The server error code.
        code_name: The matching ``codeName``.
        errmsg: The message.
        labels: ``errorLabels`` to attach (omitted when empty).
        kill_cursor: Also forget the command's cursor, as the server does for errors that
            end a cursor (CursorNotFound, CappedPositionLost, InterruptedDueToReplStateChange).
    """

    code: int
    code_name: str
    errmsg: str
    labels: Sequence[str] = field(default_factory=tuple)
    kill_cursor: bool = True


@dataclass(frozen=True)
class SilentDeath:
    """Answer a getMore with cursor id 0 and an empty batch: the cursor ends quietly."""


Fault = Hangup | Stall | ErrorReply | SilentDeath


class FaultQueue:
    """A thread-safe list of (command name, fault), consumed in order."""

    def __init__(self) -> None:
        """Create an empty queue."""
        self._lock = threading.Lock()
        self._faults: list[tuple[str, Fault]] = []

    def add(self, command: str, fault: Fault) -> None:
        """Queue ``fault`` for the next request running ``command`` (case-insensitive)."""
        with self._lock:
            self._faults.append((command.lower(), fault))

    def take(self, command: str) -> Fault | None:
        """Remove and return the first fault queued for ``command``, if any."""
        name = command.lower()
        with self._lock:
            for index, (queued, fault) in enumerate(self._faults):
                if queued == name:
                    del self._faults[index]
                    return fault
        return None

    def clear(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._faults.clear()

    def __len__(self) -> int:
        """The number of faults still queued."""
        with self._lock:
            return len(self._faults)


class CommandError(Exception):
    """Raised by a command handler; becomes an ``ok: 0`` reply with these fields."""

    def __init__(self, code: int, code_name: str, errmsg: str, labels: Sequence[str] = ()) -> None:
        """Create the error.

        Args:
            code: The server error code.
            code_name: The matching ``codeName``.
            errmsg: The message.
            labels: ``errorLabels`` to attach.
        """
        super().__init__(errmsg)
        self.code = code
        self.code_name = code_name
        self.errmsg = errmsg
        self.labels = tuple(labels)


class WriteError(CommandError):
    """An error of one write operation; becomes a ``writeErrors`` entry, not ``ok: 0``."""

    def __init__(
        self, code: int, code_name: str, errmsg: str, info: dict[str, Any] | None = None
    ) -> None:
        """Create the error; ``info`` holds extra fields (``keyPattern``, ``keyValue``)."""
        super().__init__(code, code_name, errmsg)
        self.info = info or {}


class FaultMethods:
    """Named one-shot faults, mixed into every emulated node (which sets ``faults``)."""

    faults: FaultQueue

    def drop_next_get_more(self) -> None:
        """Close the connection instead of answering the next getMore.

        pymongo never retries a getMore, so the caller sees ``AutoReconnect``.
        """
        self.faults.add("getMore", Hangup())

    def hang_up_next(self, command: str, times: int = 1) -> None:
        """Close the connection instead of answering the next ``times`` ``command``s.

        The command is not run: a node that went away before it arrived. pymongo retries
        a retryable write once by itself, so ``times`` >= 2 reaches the caller.
        """
        for _ in range(times):
            self.faults.add(command, Hangup())

    def fail_next(
        self, command: str, code: int, code_name: str, labels: Sequence[str] = ()
    ) -> None:
        """Answer the next ``command`` with error ``code``, forgetting its cursor."""
        self.faults.add(command, ErrorReply(code, code_name, f"emulated {code_name}", labels))

    def cursor_not_found_on_next_get_more(self) -> None:
        """Answer the next getMore with ``CursorNotFound`` (43)."""
        self.fail_next("getMore", 43, "CursorNotFound")

    def not_primary_on_next_get_more(self, labels: Sequence[str] = ()) -> None:
        """Answer the next getMore with ``NotWritablePrimary`` (10107).

        Args:
            labels: Error labels. None by default: mongod adds
                ``ResumableChangeStreamError`` only to change-stream cursors' errors, and a
                plain oplog getMore is not one; pass it to emulate a change-stream cursor.
        """
        self.fail_next("getMore", 10107, "NotWritablePrimary", labels)

    def interrupted_on_next_get_more(self, labels: Sequence[str] = ()) -> None:
        """Answer the next getMore with ``InterruptedDueToReplStateChange`` (11602).

        Args:
            labels: Error labels; see :meth:`not_primary_on_next_get_more`.
        """
        self.fail_next("getMore", 11602, "InterruptedDueToReplStateChange", labels)

    def stall_next(self, command: str, seconds: float) -> None:
        """Delay the reply to the next ``command`` by ``seconds`` (the reply still comes)."""
        self.faults.add(command, Stall(seconds))

    def stall_next_get_more(self, seconds: float) -> None:
        """Delay the next getMore reply by ``seconds``; pair with ``socketTimeoutMS``."""
        self.stall_next("getMore", seconds)

    def kill_cursor_silently_on_next_get_more(self) -> None:
        """Answer the next getMore with cursor id 0 and an empty batch."""
        self.faults.add("getMore", SilentDeath())


def require_admin(body: Mapping[str, Any], command: str) -> None:
    """Refuse ``command`` sent to another database than admin, as mongod does (13)."""
    if body.get("$db") != "admin":
        raise CommandError(
            13, "Unauthorized", f"{command} may only be run against the admin database."
        )
