"""Emulator: the oplog entries a write logs, in the shapes and field order mongod 7.0 writes.

A *body* is an entry without its optime: ``op, ns, ui, o, o2`` (after the session fields of
a transaction). :class:`OplogWriter` stamps it (``ts, t, v, wall``, then ``prevOpTime`` for
a transaction), appends it, and moves the majority point to it at once: a one-member
replica set commits every write as soon as it is logged.

An update logs a ``$v: 2`` delta computed from the pre- and post-image at the top level
(``d`` deleted fields, ``u`` fields changed in place, ``i`` fields appended), or the whole
post-image when the surviving fields moved (a delta cannot reorder fields). Where mongod
would write a nested ``s<field>`` sub-diff for a change inside a sub-document, this writes
the whole new sub-document under ``u``: the same post-image, a coarser description.

See also src/mongo/db/op_observer/op_observer_impl.cpp and
src/mongo/db/update/document_diff_calculator.cpp.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from typing import Any, Final

from bson.binary import Binary
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.emulator.document_store import same_bson
from shardstream.emulator.oplog import OplogStore

Body = dict[str, Any]
TERM: Final = Int64(1)
OPLOG_VERSION: Final = Int64(2)
NULL_OP_TIME: Final = {"ts": Timestamp(0, 0), "t": Int64(-1)}


def crud(op: str, ns: str, ui: Binary, o: Any, o2: Any = None) -> Body:
    """An insert (``i``), update (``u``) or delete (``d``) body; ``o2`` left out when None."""
    body: Body = {"op": op, "ns": ns, "ui": ui, "o": o}
    if o2 is not None:
        body["o2"] = o2
    return body


def command(ns: str, ui: Binary | None, o: Mapping[str, Any], o2: Any = None) -> Body:
    """A command body on ``<db>.$cmd`` (create, drop, createIndexes, ...)."""
    db = ns.partition(".")[0]
    body: Body = {"op": "c", "ns": f"{db}.$cmd"}
    if ui is not None:
        body["ui"] = ui
    body["o"] = dict(o)
    if o2 is not None:
        body["o2"] = o2
    return body


def inner(body: Mapping[str, Any]) -> Body:
    """An operation as it sits inside ``applyOps``: ``op, ns, ui, o, o2`` only."""
    return {name: body[name] for name in ("op", "ns", "ui", "o", "o2") if name in body}


def delta(pre: Mapping[str, Any], post: Mapping[str, Any]) -> Body | None:
    """The top-level ``$v: 2`` diff from ``pre`` to ``post``, or None if it cannot say it.

    None means the surviving fields are not in their old relative order, or a new field
    comes before one of them: applying a diff keeps fields in place and appends new ones.
    """
    surviving = [name for name in pre if name in post]
    if list(post)[: len(surviving)] != surviving:
        return None
    deleted = {name: False for name in pre if name not in post}
    updated = {name: post[name] for name in surviving if not same_bson(pre[name], post[name])}
    inserted = {name: post[name] for name in post if name not in pre}
    diff: Body = {}
    for section, fields in (("d", deleted), ("u", updated), ("i", inserted)):
        if fields:
            diff[section] = fields
    return diff


def update(ns: str, ui: Binary, post: Mapping[str, Any], diff: Body | None) -> Body:
    """The ``u`` body of an update to ``post``: the delta ``diff``, or (None) a replacement."""
    o2 = {"_id": post["_id"]}
    if diff is None:
        return crud("u", ns, ui, dict(post), o2)
    return crud("u", ns, ui, {"$v": 2, "diff": diff}, o2)


def replacement(ns: str, ui: Binary, post: Mapping[str, Any]) -> Body:
    """The ``u`` body of a replacement-style update (``o`` is the whole new document)."""
    return crud("u", ns, ui, dict(post), {"_id": post["_id"]})


class OplogWriter:
    """Stamps bodies with the next optime and appends them to one node's oplog."""

    def __init__(self, oplog: OplogStore) -> None:
        """Write to ``oplog``."""
        self.oplog = oplog
        self._clock: Timestamp | None = None  # the newest cluster time a request gossiped
        # Set by a chunk migration (or a sharded DDL's other shards) while it holds the
        # node's store lock: every entry it logs then carries fromMigrate, as mongod's do.
        self.from_migrate = False

    def advance(self, cluster_time: Timestamp) -> None:
        """Log every later write after ``cluster_time`` (mongod's logical clock)."""
        with self.oplog.changed:
            if self._clock is None or cluster_time > self._clock:
                self._clock = cluster_time

    def next_ts(self) -> Timestamp:
        """The ``ts`` the next write would take now (a prepared transaction's coordinator
        reads every participant's to pick the commit time)."""
        with self.oplog.changed:
            return self._next(self.oplog.last_ts)

    def _next(self, last_entry: Timestamp | None) -> Timestamp:
        last = max((t for t in (last_entry, self._clock) if t is not None), default=None)
        now = int(time.time())
        if last is None or now > last.time:
            return Timestamp(now, 1)
        return Timestamp(last.time, last.inc + 1)

    def write(
        self,
        body: Mapping[str, Any],
        *,
        transaction: bool = False,
        at: Timestamp | None = None,
        prev: Timestamp | None = None,
    ) -> Timestamp:
        """Log ``body`` at the next ``ts`` and majority-commit it; return the ``ts``.

        The ``ts`` is strictly after the newest entry and the newest gossiped cluster time:
        the wall-clock second, or that time's second with the next ``inc`` if the wall
        clock is not ahead of it.

        Args:
            body: The entry without optime fields.
            transaction: Add ``prevOpTime`` (null: the first and only entry of the
                transaction), as a transaction's ``applyOps`` entry has.
            at: Log at exactly this ``ts`` (a prepared transaction's commit), which must
                be after the newest entry.
            prev: With ``transaction``, the ``prevOpTime`` (the prepare entry's ``ts``).
        """
        with self.oplog.changed:  # one writer at a time: the ts choice and append are atomic
            ts = self._next(self.oplog.last_ts) if at is None else at
            last_ts = self.oplog.last_ts
            if last_ts is not None and ts <= last_ts:
                raise ValueError(f"expected a ts after {last_ts}, got {ts}")
            if self.from_migrate:
                body = {**body, "fromMigrate": True}
            entry: Body = {
                **body,
                "ts": ts,
                "t": TERM,
                "v": OPLOG_VERSION,
                "wall": datetime.datetime.now(datetime.UTC),
            }
            if transaction:
                entry["prevOpTime"] = (
                    dict(NULL_OP_TIME) if prev is None else {"ts": prev, "t": TERM}
                )
            self.oplog.append(entry)
            majority = self.oplog.majority
            if majority is None or ts > majority:
                self.oplog.set_majority(ts)
            return ts
