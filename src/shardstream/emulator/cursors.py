"""Emulator: server-side cursors and the small query-filter subset they evaluate.

Filters support equality (dotted paths included), ``$eq``, ``$ne``, ``$gt``, ``$gte``,
``$lt``, ``$lte``, ``$in``, ``$nin``, ``$exists``, top-level ``$and``, ``$or`` and ``$expr``
(with the expressions of :mod:`~shardstream.emulator.update_pipeline`); anything else is refused
with ``BadValue`` rather than silently matching, so a test never passes by accident.
``$gt``-style operators compare within the operand's type bracket only, as the server's
match language does (``$expr`` compares across brackets, as aggregation does); a sort
orders by :mod:`~shardstream.emulator.bson_order`, a missing field as null.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, Final

from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId

from shardstream.emulator.aggregation_expressions import expression_is_true
from shardstream.emulator.bson_order import MISSING_KEY, NAN_KEY, NULL_BRACKET, ORDERED, sort_key
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


def _compare(value: Any, op: str, operand: Any) -> bool:
    # Type bracketing, as the server's ComparisonMatchExpression: no match across
    # brackets, except null against missing and MinKey / MaxKey against everything.
    left = MISSING_KEY if value is MISSING else sort_key(value)
    right = sort_key(operand)
    if left[0] != right[0]:
        if left[0] + right[0] == NULL_BRACKET:
            return value is MISSING and op in ("$gte", "$lte")
        if isinstance(operand, MaxKey | MinKey):
            return op in (("$lt", "$lte") if isinstance(operand, MaxKey) else ("$gt", "$gte"))
        return False
    if left == NAN_KEY or right == NAN_KEY:  # NaN equals NaN, but is not below or above
        return op in ("$gte", "$lte") and left == right
    return ORDERED[op]((left > right) - (left < right))


# Types whose Python equality is the server's for two values of the type (not float: NaN;
# not Decimal128, which compares bit patterns; not datetime: naive against aware).
_PLAIN: Final = frozenset({str, int, bool, Int64, ObjectId, bytes})


def _equals(value: Any, operand: Any) -> bool:
    # The server's equality: numbers by value across int, long, double and decimal, but
    # never across brackets (Python takes True == 1), and NaN equal to NaN.
    if value is MISSING:
        return operand is None
    if type(value) is type(operand) and type(value) in _PLAIN:
        return bool(value == operand)
    return sort_key(value) == sort_key(operand)


def _match_operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _equals(value, operand)
    if op == "$ne":
        return not _equals(value, operand)
    if op in ORDERED:
        return _compare(value, op, operand)
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
        if key == "$or":
            if not any(matches(doc, part) for part in expected):
                return False
            continue
        if key == "$expr":
            if not expression_is_true(expected, doc):
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


def select(
    docs: Iterable[Any],
    query: Mapping[str, Any],
    skip: Any,
    limit: Any,
    sort: Mapping[str, Any] | None = None,
) -> list[Any]:
    """``docs`` matching ``query``, in ``sort`` order, after ``skip`` and up to ``limit``
    (0: no limit), as ``find`` and ``count`` take them (a negative limit counts as its
    absolute value)."""
    found = sort_documents([doc for doc in docs if matches(doc, query)], sort)
    found = found[int(skip or 0) :]
    limit = abs(int(limit or 0))
    return found[:limit] if limit else found


def sort_documents(docs: list[Any], spec: Mapping[str, Any] | None) -> list[Any]:
    """``docs`` ordered by the sort ``spec`` (None or empty: unchanged); ties keep their order.

    Raises:
        CommandError: ``BadValue`` for a direction other than 1 / -1, ``$natural`` with
            other keys, or an array value under a sort key.
    """
    if not spec:
        return docs
    keys = [(path, _direction(path, direction)) for path, direction in spec.items()]
    if any(path == "$natural" for path, _ in keys):
        if len(keys) != 1:
            raise CommandError(2, "BadValue", "$natural sort cannot be combined with other keys")
        return docs if keys[0][1] == 1 else list(reversed(docs))
    ordered = list(docs)
    # Python's sort is stable: sorting by the last key first leaves the first key in charge.
    for path, direction in reversed(keys):
        ordered.sort(key=functools.partial(_sort_value, path=path), reverse=direction == -1)
    return ordered


def _direction(path: str, direction: Any) -> int:
    numeric = isinstance(direction, int | float) and not isinstance(direction, bool)
    if numeric and direction in (1, -1):
        return int(direction)
    raise CommandError(2, "BadValue", f"emulator sorts by 1 or -1 only, got {path}: {direction!r}")


def _sort_value(doc: Any, path: str) -> tuple[Any, ...]:
    value = lookup(doc, path)
    if isinstance(value, list):
        raise CommandError(2, "BadValue", f"emulator cannot sort on the array at {path!r}")
    return sort_key(None if value is MISSING else value)


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
