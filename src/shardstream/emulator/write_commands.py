"""Emulator: the CRUD write commands a replica-set member answers.

``insert``, ``update`` and ``delete`` take their operations from the body or from an OP_MSG
document sequence (pymongo sends ``documents``, ``updates`` and ``deletes`` as one; the wire
layer merges sequences into the body). A failed operation becomes a ``writeErrors`` entry
of an ``ok: 1`` reply; ``ordered`` (the default) stops at the first one, unordered goes on.
Inside a transaction the first failure aborts the transaction, as on mongod. Inserting
into, or upserting into, a missing collection creates it first (logged as ``create``).

Also here: ``appendOplogNote``, which logs a no-op carrying ``data``.

See also src/mongo/db/ops/write_ops_exec.cpp and src/mongo/db/commands/write_commands.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shardstream.emulator.faults import CommandError, WriteError, require_admin
from shardstream.emulator.transactions import Transaction
from shardstream.emulator.update_operators import (
    apply_operators,
    is_replacement,
    replace,
    upsert_seed,
)
from shardstream.emulator.update_targeting import SHARD_KEY_FIELD, refuse_key_change
from shardstream.emulator.write_path import WritePath, namespace

Body = dict[str, Any]
Handler = Callable[[Body], Body]
Operation = Callable[[int, Body, Transaction | None], None]


def _write_error(index: int, err: CommandError) -> Body:
    entry: Body = {"index": index, "code": err.code, "errmsg": err.errmsg}
    if isinstance(err, WriteError):
        entry.update(err.info)
    return entry


def _operations(body: Mapping[str, Any], field: str) -> list[Any]:
    ops = body.get(field)
    if not isinstance(ops, list):
        raise CommandError(9, "FailedToParse", f"BSON field '{field}' is missing or not an array")
    return ops


def _refuse_unsupported(spec: Mapping[str, Any]) -> None:
    # A collation changes what matches, a sort which document: never ignore them silently.
    for option in ("collation", "sort"):
        if spec.get(option):
            raise WriteError(2, "BadValue", f"emulator does not support '{option}' in writes")


def post_image(pre: Body, u: Any, array_filters: list[Any], *, inserting: bool) -> Body:
    """The post-image of ``pre`` under ``u`` (replacement, operators or pipeline)."""
    if isinstance(u, list):
        # Imported on first use: only pipeline updates need the evaluator, and the rest of
        # the emulator then does not depend on it.
        from shardstream.emulator.update_pipeline import run_update_pipeline

        # The pipeline's result is applied like a replacement: it keeps the old _id.
        # The evaluator copies what it changes, so ``pre`` needs no copy of its own.
        return replace(pre if "_id" in pre else None, run_update_pipeline(pre, u))
    if is_replacement(u):
        return replace(pre if "_id" in pre else None, u)
    return apply_operators(pre, u, array_filters, inserting=inserting)


class WriteCommands:
    """The handlers of ``insert``, ``update``, ``delete`` and ``appendOplogNote``."""

    def __init__(self, path: WritePath) -> None:
        """Answer through ``path`` (the node's store, oplog and transactions)."""
        self._path = path

    def register(self, commands: dict[str, Handler]) -> None:
        """Add the handlers to a node's command table (lower-case names)."""
        commands["insert"] = self.insert
        commands["update"] = self.update
        commands["delete"] = self.delete
        commands["appendoplognote"] = self.append_oplog_note

    def _run(self, body: Body, ops: list[Any], operation: Operation) -> list[Body]:
        """Run ``operation`` on each of ``ops`` in order; return the write errors."""
        ordered = body.get("ordered", True) is not False
        errors: list[Body] = []
        txn = self._path.transactions.for_command(body)
        for index, op in enumerate(ops):
            try:
                operation(index, op, txn)
            except CommandError as err:
                errors.append(_write_error(index, err))
                if txn is not None:
                    self._path.transactions.roll_back(txn)
                    break
                if ordered:
                    break
        return errors

    @staticmethod
    def _reply(fields: Body, errors: list[Body]) -> Body:
        if errors:
            fields["writeErrors"] = errors
        fields["ok"] = 1.0
        return fields

    def insert(self, body: Body) -> Body:
        """Answer ``insert``: ``{n, writeErrors?, ok}``."""
        ns = namespace(body, "insert")
        docs = _operations(body, "documents")
        inserted = 0

        def insert_one(_index: int, doc: Body, txn: Transaction | None) -> None:
            nonlocal inserted
            if not isinstance(doc, dict):
                raise WriteError(2, "BadValue", "each document to insert must be a document")
            self._path.insert(ns, doc, txn)
            inserted += 1

        with self._path.store.lock:
            errors = self._run(body, docs, insert_one)
        return self._reply({"n": inserted}, errors)

    def update(self, body: Body) -> Body:
        """Answer ``update``: ``{n, nModified, upserted?, writeErrors?, ok}``."""
        ns = namespace(body, "update")
        specs = _operations(body, "updates")
        counts = {"n": 0, "nModified": 0}
        upserted: list[Body] = []

        def update_one(index: int, spec: Body, txn: Transaction | None) -> None:
            _refuse_unsupported(spec)
            query, u = spec.get("q") or {}, spec.get("u")
            if not isinstance(u, dict | list):
                raise WriteError(9, "FailedToParse", "an update needs 'u', a document or pipeline")
            multi, filters = bool(spec.get("multi")), list(spec.get("arrayFilters") or [])
            replacement = is_replacement(u)
            if replacement and multi:
                raise WriteError(
                    9, "FailedToParse", "multi update is not supported for replacement-style update"
                )
            coll = self._path.store.get(ns)
            found = coll.find(query, None if multi else 1) if coll is not None else []
            for pre in found:
                post = post_image(pre, u, filters, inserting=False)
                refuse_key_change(body.get(SHARD_KEY_FIELD), query, pre, post)
                if coll is not None:  # always: nothing is found without a collection
                    changed = self._path.update(coll, pre, post, replacement=replacement, txn=txn)
                    counts["n"] += 1
                    counts["nModified"] += changed
            if found or not spec.get("upsert"):
                return
            seed = upsert_seed(query)
            post = post_image(seed, u, filters, inserting=True)
            doc = self._path.insert(ns, post, txn)
            counts["n"] += 1
            upserted.append({"index": index, "_id": doc["_id"]})

        with self._path.store.lock:
            errors = self._run(body, specs, update_one)
        reply: Body = dict(counts)
        if upserted:
            reply["upserted"] = upserted
        return self._reply(reply, errors)

    def delete(self, body: Body) -> Body:
        """Answer ``delete``: ``{n, writeErrors?, ok}``."""
        ns = namespace(body, "delete")
        specs = _operations(body, "deletes")
        deleted = 0

        def delete_some(_index: int, spec: Body, txn: Transaction | None) -> None:
            nonlocal deleted
            _refuse_unsupported(spec)
            limit = spec.get("limit", 0)
            if limit not in (0, 1):
                raise WriteError(9, "FailedToParse", f"The limit field must be 0 or 1, got {limit}")
            coll = self._path.store.get(ns)
            if coll is None:
                return
            for doc in coll.find(spec.get("q") or {}, 1 if limit else None):
                self._path.delete(coll, doc, txn)
                deleted += 1

        with self._path.store.lock:
            errors = self._run(body, specs, delete_some)
        return self._reply({"n": deleted}, errors)

    def append_oplog_note(self, body: Body) -> Body:
        """Answer ``appendOplogNote``: log ``{op: "n", ns: "", o: data}``."""
        require_admin(body, "appendOplogNote")
        data = body.get("data")
        if not isinstance(data, dict):
            raise CommandError(9, "FailedToParse", "appendOplogNote needs a 'data' document")
        with self._path.store.lock:
            self._path.oplog.write({"op": "n", "ns": "", "o": data})
        return {"ok": 1.0}
