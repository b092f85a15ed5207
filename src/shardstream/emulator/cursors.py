"""Emulator: server-side cursors and the small query-filter subset they evaluate.

Filters support equality (dotted paths included), ``$eq``, ``$ne``, ``$gt``, ``$gte``,
``$lt``, ``$lte``, ``$in``, ``$nin``, ``$exists`` and top-level ``$and``; anything else is
refused with ``BadValue`` rather than silently matching, so a test never passes by accident.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shardstream.emulator.faults import CommandError

MISSING = object()  # what lookup() gives for an absent path
# The server caps a reply batch at 16 MiB of documents; larger replies would also exceed
# maxMessageSizeBytes.
MAX_BATCH_BYTES = 16 * 1024 * 1024


def lookup(doc: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` in ``doc`` (through sub-documents only), or ``MISSING``."""
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def _compare(value: Any, op: Callable[[Any, Any], bool], operand: Any) -> bool:
    if value is MISSING:
        return False
    try:
        return bool(op(value, operand))
    except TypeError:  # the server never orders values of different BSON types this way
        return False


def _equals(value: Any, operand: Any) -> bool:
    if value is MISSING:
        return operand is None
    return bool(value == operand)


def _match_operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _equals(value, operand)
    if op == "$ne":
        return not _equals(value, operand)
    if op == "$gt":
        return _compare(value, lambda a, b: a > b, operand)
    if op == "$gte":
        return _compare(value, lambda a, b: a >= b, operand)
    if op == "$lt":
        return _compare(value, lambda a, b: a < b, operand)
    if op == "$lte":
        return _compare(value, lambda a, b: a <= b, operand)
    if op == "$in":
        return any(_equals(value, item) for item in operand)
    if op == "$nin":
        return not any(_equals(value, item) for item in operand)
    if op == "$exists":
        return (value is not MISSING) == bool(operand)
    raise CommandError(2, "BadValue", f"emulator does not support the operator {op}")


def matches(doc: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """Whether ``doc`` satisfies ``query`` (the supported subset only).

    Args:
        doc: The document (a dict or ``RawBSONDocument``).
        query: The find filter.

    Raises:
        CommandError: ``BadValue`` for an unsupported operator.
    """
    for key, expected in query.items():
        if key == "$and":
            if not all(matches(doc, part) for part in expected):
                return False
            continue
        if key.startswith("$"):
            raise CommandError(2, "BadValue", f"emulator does not support {key}")
        value = lookup(doc, key)
        if isinstance(expected, Mapping) and expected and all(k.startswith("$") for k in expected):
            if not all(_match_operator(value, op, arg) for op, arg in expected.items()):
                return False
        elif not _equals(value, expected):
            return False
    return True


def select(docs: Iterable[Any], query: Mapping[str, Any], skip: Any, limit: Any) -> list[Any]:
    """``docs`` matching ``query``, after ``skip`` and up to ``limit`` (0: no limit), as
    ``find`` and ``count`` take them (a negative limit counts as its absolute value)."""
    found = [doc for doc in docs if matches(doc, query)][int(skip or 0) :]
    limit = abs(int(limit or 0))
    return found[:limit] if limit else found


def doc_size(doc: Any) -> int:
    """The encoded size of a batch document (exact for raw documents, estimated otherwise)."""
    raw = getattr(doc, "raw", None)
    return len(raw) if isinstance(raw, bytes) else 1024


class ServerCursor(ABC):
    """One open cursor: its namespace and how to produce the next batch."""

    def __init__(self, ns: str) -> None:
        """Create the cursor over namespace ``ns`` ("db.collection")."""
        self.ns = ns
        self.exhausted = False

    @abstractmethod
    def next_batch(
        self, batch_size: int | None, max_time_ms: int | None, stopping: threading.Event
    ) -> list[Any]:
        """Return the next batch; set ``exhausted`` when no further batch can follow.

        Args:
            batch_size: The most documents to return (None: up to the byte cap).
            max_time_ms: For a getMore on an awaitData cursor, how long to wait for data.
            stopping: Set when the server stops; any wait ends early.
        """


class ListCursor(ServerCursor):
    """A cursor over a fixed list of documents (a snapshot taken by ``find``)."""

    def __init__(self, ns: str, docs: list[Any]) -> None:
        """Create a cursor that returns ``docs`` in order."""
        super().__init__(ns)
        self._docs = docs
        self._next = 0

    def next_batch(
        self, batch_size: int | None, _max_time_ms: int | None, _stopping: threading.Event
    ) -> list[Any]:
        """Return up to ``batch_size`` more documents; exhausted after the last one."""
        batch: list[Any] = []
        size = 0
        while self._next < len(self._docs) and (batch_size is None or len(batch) < batch_size):
            doc = self._docs[self._next]
            if batch and size + doc_size(doc) > MAX_BATCH_BYTES:
                break
            batch.append(doc)
            size += doc_size(doc)
            self._next += 1
        self.exhausted = self._next >= len(self._docs)
        return batch
