"""Emulator: multi-document transactions as pymongo runs them, committed as one ``applyOps``.

A write carrying ``lsid``, ``txnNumber`` and ``autocommit: false`` belongs to that session's
transaction (the first one also carries ``startTransaction: true``). Its writes are applied
at once, so the session reads its own writes, and buffered for the oplog; each write also
notes what it replaced (the document before it, or that there was none, or that the
collection did not exist), and ``abortTransaction`` undoes those notes newest first. (A
copy of each collection would make every transaction cost as much as the collection.)
``commitTransaction`` logs the buffered operations as one ``applyOps`` entry on
``admin.$cmd``, with the session fields first and a null ``prevOpTime``, as mongod logs a
transaction that fits one entry; a transaction that wrote nothing logs nothing.

A transaction that wrote on several shards is committed by the emulated mongos in two
phases (``chunk_routing``): :meth:`TransactionTable.prepare` logs each participant's
operations as one ``applyOps`` with ``prepare: true``, then
:meth:`TransactionTable.commit_prepared` logs ``{commitTransaction: 1, commitTimestamp}``
at exactly the commit time the coordinator picked, ``prevOpTime`` pointing at the prepare
entry, as a participant of a cross-shard transaction does.

Unlike mongod there is no isolation: other sessions see a transaction's writes before it
commits. A write with ``lsid`` and ``txnNumber`` but no ``autocommit: false`` is a
retryable write, not a transaction, and is logged on its own.

See also src/mongo/db/transaction/transaction_participant.cpp.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import bson
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.emulator.document_store import Collection, DocumentStore
from shardstream.emulator.faults import CommandError, require_admin
from shardstream.emulator.write_oplog import OplogWriter

Body = dict[str, Any]
# With no authentication, mongod stamps every session id with the SHA-256 of the empty
# user name: it shows up as lsid.uid in transaction oplog entries.
_ANONYMOUS_UID: Final = hashlib.sha256(b"").digest()
_TRANSIENT: Final = ("TransientTransactionError",)


@dataclass(frozen=True, slots=True)
class DocumentUndo:
    """What one write replaced: ``before`` (None: no document) under ``key`` in ``coll``."""

    coll: Collection
    key: bytes
    before: Body | None
    record_id: int | None  # where ``before`` stood, to put a deleted document back

    def apply(self) -> None:
        """Make ``coll`` hold ``before`` under ``key`` again."""
        present = self.coll.get(self.key) is not None
        if self.before is None:
            if present:
                self.coll.delete(self.key)
        elif present:
            self.coll.replace(self.key, self.before)
        else:
            assert self.record_id is not None, "a deleted document's undo keeps its place"
            self.coll.restore(self.key, self.before, self.record_id)


@dataclass
class Transaction:
    """One open transaction: the operations to log and how to undo its writes."""

    lsid: Body
    txn_number: int
    ops: list[Body] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # namespaces it created
    undo: list[DocumentUndo] = field(default_factory=list)  # oldest first

    def note_created(self, ns: str) -> None:
        """Note that this transaction created ``ns`` (an abort drops it)."""
        self.created.append(ns)

    def note_write(self, coll: Collection, key: bytes) -> None:
        """Note the document under ``key`` before a write changes it."""
        before = coll.get(key)
        record_id = coll.record_id(key) if before is not None else None
        self.undo.append(DocumentUndo(coll, key, before, record_id))


def _session(body: Body) -> tuple[bytes, Body, int]:
    lsid, txn_number = body.get("lsid"), body.get("txnNumber")
    if not isinstance(lsid, dict) or not isinstance(txn_number, int):
        raise CommandError(72, "InvalidOptions", "a transaction needs both 'lsid' and 'txnNumber'")
    return bson.encode(lsid), lsid, int(txn_number)


def _entry(lsid: Body, txn_number: int, o: Body) -> Body:
    """A transaction's oplog entry on ``admin.$cmd``: the session fields first."""
    session = {"lsid": {**lsid, "uid": _ANONYMOUS_UID}, "txnNumber": Int64(txn_number)}
    return {**session, "op": "c", "ns": "admin.$cmd", "o": o}


def _no_such(txn_number: int) -> CommandError:
    return CommandError(
        251,
        "NoSuchTransaction",
        f"Transaction with txnNumber {txn_number} has been aborted or never started.",
        _TRANSIENT,
    )


class TransactionTable:
    """The open transaction of each session, and the last one each committed."""

    def __init__(self, store: DocumentStore, oplog: OplogWriter) -> None:
        """Track transactions writing to ``store`` and committing to ``oplog``."""
        self._store = store
        self._oplog = oplog
        self._open: dict[bytes, Transaction] = {}
        self._committed: dict[bytes, int] = {}
        self._started: dict[bytes, int] = {}  # the newest txnNumber each session started

    def register(self, commands: dict[str, Callable[[Body], Body]]) -> None:
        """Add ``commitTransaction`` and ``abortTransaction`` to a node's command table."""
        commands["committransaction"] = self.commit
        commands["aborttransaction"] = self.abort

    def for_command(self, body: Body) -> Transaction | None:
        """The transaction ``body`` runs in (None: not in one), starting it if asked.

        Raises:
            CommandError: ``NoSuchTransaction`` (251, transient) for a transaction that
                is not open; ``InvalidOptions`` (72) without a session.
        """
        if body.get("autocommit") is not False:
            return None
        key, lsid, txn_number = _session(body)
        current = self._open.get(key)
        starting = bool(body.get("startTransaction"))
        if current is not None and current.txn_number == txn_number and not starting:
            return current
        if txn_number <= self._started.get(key, -1):
            if starting:
                raise CommandError(
                    117,
                    "ConflictingOperationInProgress",
                    f"transaction {txn_number} was already started on this session",
                )
            raise _no_such(txn_number)
        # A new transaction; also when its startTransaction came with a read, which the
        # emulator does not track. A newer txnNumber aborts the session's open one.
        if current is not None:
            self.roll_back(current)
        current = self._open[key] = Transaction(lsid, txn_number)
        self._started[key] = txn_number
        return current

    def roll_back(self, txn: Transaction) -> None:
        """Undo ``txn``'s changes and forget it (after an abort or a failed write)."""
        # Newest first: each step restores the state before its write, so unique
        # indexes hold at every step.
        for step in reversed(txn.undo):
            step.apply()
        for ns in reversed(txn.created):
            self._store.put(ns, None)
        self._open.pop(bson.encode(txn.lsid), None)

    def commit(self, body: Body) -> Body:
        """Answer ``commitTransaction``: log the operations as one ``applyOps`` entry."""
        require_admin(body, "commitTransaction")
        key, lsid, txn_number = _session(body)
        with self._store.lock:
            txn = self._open.get(key)
            if txn is None or txn.txn_number != txn_number:
                # A retried commit, or a transaction that only read: reads are not tracked,
                # so its start was never seen, and it has nothing to log.
                if self._committed.get(key) == txn_number or txn_number > self._started.get(
                    key, -1
                ):
                    return {"ok": 1.0}
                raise _no_such(txn_number)
            if txn.ops:
                o = {"applyOps": txn.ops}
                self._oplog.write(_entry(lsid, txn_number, o), transaction=True)
            del self._open[key]
            self._committed[key] = txn_number
        return {"ok": 1.0}

    def open_namespaces(self) -> set[str]:
        """The namespaces open transactions wrote (a migration waits for them to end)."""
        with self._store.lock:
            return {op.get("ns", "") for txn in self._open.values() for op in txn.ops}

    def has_writes(self, body: Body) -> bool:
        """Whether the session's open transaction wrote here (the caller holds the lock)."""
        key, _, txn_number = _session(body)
        txn = self._open.get(key)
        return txn is not None and txn.txn_number == txn_number and bool(txn.ops)

    def prepare(self, body: Body) -> Timestamp | None:
        """Log the session's open transaction as prepared; its ``ts`` (None: it wrote
        nothing here, a read-only participant, which logs nothing). Caller holds the lock.
        """
        key, lsid, txn_number = _session(body)
        txn = self._open.get(key)
        if txn is None or txn.txn_number != txn_number:
            raise _no_such(txn_number)
        if not txn.ops:
            del self._open[key]
            return None
        o = {"applyOps": txn.ops, "prepare": True}
        return self._oplog.write(_entry(lsid, txn_number, o), transaction=True)

    def commit_prepared(self, body: Body, prepared: Timestamp, commit_ts: Timestamp) -> None:
        """Log the commit of the transaction prepared at ``prepared``, at ``commit_ts``."""
        key, lsid, txn_number = _session(body)
        o = {"commitTransaction": 1, "commitTimestamp": commit_ts}
        self._oplog.write(
            _entry(lsid, txn_number, o), transaction=True, at=commit_ts, prev=prepared
        )
        self._open.pop(key, None)
        self._committed[key] = txn_number

    def abort(self, body: Body) -> Body:
        """Answer ``abortTransaction``: put back what the transaction changed."""
        require_admin(body, "abortTransaction")
        key, _, txn_number = _session(body)
        with self._store.lock:
            txn = self._open.get(key)
            if txn is None or txn.txn_number != txn_number:
                if txn_number > self._started.get(key, -1):
                    return {"ok": 1.0}  # a transaction that only read: nothing to undo
                raise _no_such(txn_number)
            self.roll_back(txn)
        return {"ok": 1.0}
