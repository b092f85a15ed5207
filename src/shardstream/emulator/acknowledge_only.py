"""Emulator: a mongos that acknowledges chosen databases' writes without applying them.

A benchmark of a writer (``shardstream sync``) wants the writer's own cost, not the
emulated server's: a Python emulator spends about as much CPU taking a write as the sync
spends making it, and the two share the machine's cores.  With ``acknowledge_only``
databases, mongos answers their ``insert``, ``update`` and ``delete`` as a server would
that applied every operation (``n`` per operation, no write errors) and forgets them:
nothing is stored, logged or routed.  Writes to every other database (the sync's own
checkpoints, say) are served as always.

A transaction whose statements were all acknowledged this way never reached a shard, so
its ``commitTransaction`` or ``abortTransaction`` is answered here too; one that also wrote
elsewhere is ended on the shards that took those writes (they never saw the rest).

No real server has such a mode: it is a measuring device, and a test double only for the
server's cost.  Reads see none of the acknowledged writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Final

import bson

from shardstream.emulator.write_path import namespace

Body = dict[str, Any]
Handler = Callable[[Body], Body]
_OPERATIONS: Final = {"insert": "documents", "update": "updates", "delete": "deletes"}


class AcknowledgeOnly:
    """Wraps a mongos's write and transaction-ending handlers for ``databases``."""

    def __init__(self, databases: Iterable[str]) -> None:
        self.databases = frozenset(databases)
        self.acknowledged = 0  # operations answered without being applied
        self._lock = threading.Lock()
        # Open transactions (lsid bytes, txnNumber) -> whether a statement went to a shard.
        self._transactions: dict[tuple[bytes, int], bool] = {}

    def wrap(self, commands: dict[str, Handler]) -> None:
        """Replace the handlers in ``commands`` (a node's, keyed by lower-case name)."""
        for name, field in _OPERATIONS.items():
            commands[name] = self._write(commands[name], name, field)
        for name in ("committransaction", "aborttransaction"):
            commands[name] = self._ending(commands[name])

    def _write(self, handler: Handler, command: str, field: str) -> Handler:
        def run(body: Body) -> Body:
            db = namespace(body, command).partition(".")[0]
            transaction = _transaction(body)
            if db not in self.databases:
                if transaction is not None:
                    with self._lock:
                        self._transactions[transaction] = True
                return handler(body)
            operations = body.get(field)
            count = len(operations) if isinstance(operations, list) else 0
            with self._lock:
                self.acknowledged += count
                if transaction is not None:
                    self._transactions.setdefault(transaction, False)
            reply: Body = {"n": count, "ok": 1.0}
            if command == "update":
                reply["nModified"] = count
            return reply

        return run

    def _ending(self, handler: Handler) -> Handler:
        def run(body: Body) -> Body:
            transaction = _transaction(body)
            with self._lock:
                forwarded = self._transactions.pop(transaction, True) if transaction else True
            return handler(body) if forwarded else {"ok": 1.0}

        return run


def _transaction(body: Body) -> tuple[bytes, int] | None:
    """The body's transaction as ``(lsid bytes, txnNumber)``, or None outside one."""
    lsid, number = body.get("lsid"), body.get("txnNumber")
    if body.get("autocommit") is not False or not isinstance(lsid, dict):
        return None
    return bson.encode(lsid), int(number) if isinstance(number, int) else -1
