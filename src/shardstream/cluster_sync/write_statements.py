"""Sync: each document write as the statement the target's write command carries, in BSON.

A write of the sync is one statement of an ``update`` or ``delete`` command (the rules are
:mod:`~shardstream.cluster_sync.apply_rules`'):

* replace-upsert (insert, replace): ``{q: documentKey, u: fullDocument, upsert: true}``;
* update: ``{q: documentKey, u: <pipeline or modifiers>}``;
* delete: ``{q: documentKey, limit: 1}``.

The statement is kept as its bytes from planning to the wire: the writers send runs of
them as commands (:mod:`~shardstream.cluster_sync.statement_commands`), and pymongo copies
each one into its command as it is (:class:`RawStatement`).  Building a pymongo write model
per event, and having the driver validate, batch and encode it, cost more than reading the
event (``benchmarks/README.md``, "Write statements from the events' bytes").

Most events are planned in C from their bytes (:data:`compiled_statement`,
``_write_statements.c``); the rest (a sub-diff, a field the C walk does not vouch for, an
install without a compiler) by :func:`statement_of` from the decoded event: the two give the
same bytes for the same event (``tests/cluster_sync/test_write_statements.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import bson

from shardstream.oplog import OPLOG_CODEC_OPTIONS

REPLACE: Final = 0  # an insert's or a replace's upsert of the whole document
UPDATE: Final = 1
DELETE: Final = 2
KINDS: Final = ("replace", "update", "delete")

CompiledPlan = tuple[int, str, str, bytes, bytes, dict[str, Any], int, bytes | None, int | None]
"""(kind, db, coll, route, statement, token, clusterTime as seconds << 32 | increment, lsid
BSON, txnNumber) of an event, as ``_write_statements.write_statement`` gives it."""

try:
    from shardstream.cluster_sync._write_statements import write_statement as _compiled
except ImportError:  # installed without a C compiler: every event is planned in Python
    _compiled = None  # type: ignore[assignment]

compiled_statement: Final[Callable[[bytes], CompiledPlan | None] | None] = _compiled


class RawStatement:
    """A statement's BSON that pymongo's encoder copies into a command as it is.

    pymongo writes any value whose ``_type_marker`` is a raw document's (101) from its
    ``raw`` bytes; a :class:`~bson.raw_bson.RawBSONDocument` would do the same, but building
    one checks its bytes in Python, which cost more than the rest of sending the statement.
    """

    __slots__ = ("raw",)
    _type_marker: Final = 101  # bson.raw_bson._RAW_BSON_DOCUMENT_MARKER

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


def statement_of(kind: int, key: Mapping[str, Any], body: Any = None) -> bytes:
    """The statement for a write of ``kind`` to the document ``key``: ``body`` is the
    whole document (:data:`REPLACE`) or the update (:data:`UPDATE`)."""
    if kind == REPLACE:
        return bson.encode({"q": key, "u": body, "upsert": True})
    if kind == UPDATE:
        return bson.encode({"q": key, "u": body})
    return bson.encode({"q": key, "limit": 1})


def statement_parts(statement: bytes) -> tuple[dict[str, Any], Any]:
    """A statement's ``q`` and ``u`` (None for a delete), decoded as the event's values are
    (what encoding them gives back is the statement: its bytes were vouched for)."""
    fields = bson.decode(statement, OPLOG_CODEC_OPTIONS)
    return fields["q"], fields.get("u")
