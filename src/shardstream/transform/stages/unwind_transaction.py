"""Stage 2: ``applyOps`` and ``commitTransaction`` entries become one op each.

Emulates ``DocumentSourceChangeStreamUnwindTransaction``
(document_source_change_stream_unwind_transaction.cpp).  A transaction's ops are
emitted when its committing entry is read: the last ``applyOps`` of an unprepared
transaction, or the ``commitTransaction`` of a prepared one.  Earlier entries of
the chain (``partialTxn`` / ``prepare``) are found by following ``prevOpTime``
back, as mongod reads them from its oplog: first in the entries this stream has
already seen, then through a :class:`TransactionHistory` for entries older than
the stream's start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Protocol

from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.transform import fields as f

_NULL_TS: Final = Timestamp(0, 0)
_MAX_REMEMBERED: Final = 100_000  # bounds memory if a shard leaves prepared txns open


class TransactionHistory(Protocol):
    """Reads an older oplog entry back by its ``ts`` (the source of the oplog implements it)."""

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """Return the entry whose ``ts`` is ``ts``, or None if the oplog no longer has it."""


class UnwindTransaction:
    """Unwinds transactions for one shard's stream.

    Args:
        matches_op: the filter for ops inside ``applyOps`` (the oplog filter's
            operation and notFromMigrate rules).
        history: where to read chain entries older than what this stream saw.
        reads_multi_op_type: the server reads ``multiOpType`` (8.0 and later).
    """

    __slots__ = ("_history", "_matches_op", "_partial", "_reads_multi_op_type")

    def __init__(
        self,
        matches_op: Callable[[Mapping[str, Any]], bool],
        history: TransactionHistory | None = None,
        *,
        reads_multi_op_type: bool = True,
    ) -> None:
        self._matches_op = matches_op
        self._history = history
        self._reads_multi_op_type = reads_multi_op_type
        self._partial: dict[Timestamp, Mapping[str, Any]] = {}

    def remember(self, entry: Mapping[str, Any]) -> None:
        """See every entry (before filtering) so later commits can find their chain.

        Complexity: O(1); an abort or a commit frees its chain.
        """
        if entry.get("op") != "c":
            return
        o = entry.get("o")
        if not isinstance(o, Mapping):
            # A transaction's entry without its document: mongod reads it back by optime
            # and fails on it (5543806), so it is kept for a commit to find, not missed (286).
            if "txnNumber" in entry:
                self._keep(entry)
            return
        if isinstance(o.get("applyOps"), list) and (
            o.get("partialTxn") is True or o.get("prepare") is True
        ):
            self._keep(entry)
        elif "abortTransaction" in o:
            self._forget_chain(entry)

    def _keep(self, entry: Mapping[str, Any]) -> None:
        ts = entry.get("ts")
        if isinstance(ts, Timestamp) and len(self._partial) < _MAX_REMEMBERED:
            self._partial[ts] = entry

    def is_unwindable(self, entry: Mapping[str, Any]) -> bool:
        """Whether ``entry`` carries ops to unwind (a committing applyOps or a commit)."""
        o = entry.get("o")
        return (
            entry.get("op") == "c"
            and isinstance(o, Mapping)
            and ("applyOps" in o or "commitTransaction" in o)
        )

    def unwind(self, entry: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Yield the ops of the transaction ``entry`` commits, each ready for the transform.

        Every op gets ``txnOpIndex`` (0-based over the whole transaction, counting
        ops the filter drops), ``applyOpsIndex``, ``applyOpsTs``, and the committing
        entry's ``ts`` and ``wall``; transaction ops also ``lsid`` / ``txnNumber``.
        """
        o: Mapping[str, Any] = entry["o"]
        commit_ts = entry.get("ts")
        # Checked in the server's order: multiOpType, then lsid / txnNumber, then the chain.
        applied_separately = self._applied_separately(entry)
        session = {} if applied_separately else _session_fields(entry)
        chain = [] if applied_separately else self._chain_before(entry)
        if "applyOps" in o:
            apply_ops_entries = [*chain, entry]
        elif not chain:
            # A commitTransaction holds no ops itself: without a chain there is nothing to read.
            raise TransformError("No transaction oplog entries found", code=5543804)
        else:
            apply_ops_entries = chain
        commit_timestamp = o.get("commitTimestamp") if "applyOps" not in o else None
        txn_op_index = 0
        for holder in apply_ops_entries:
            # A chain entry's own o is read as it comes (the server parses it as an
            # OplogEntry, whose o must be an object): not a document, it has no applyOps.
            holder_o = holder.get("o")
            ops = holder_o.get("applyOps") if isinstance(holder_o, Mapping) else None
            if not isinstance(ops, list):
                raise TransformError(
                    f"expected o.applyOps to be an array in the transaction entry at "
                    f"{holder.get('ts')!r}, got {ops!r:.100}",
                    code=40532 if holder is entry else 5543806,
                )
            for apply_ops_index, op in enumerate(ops):
                index = txn_op_index
                txn_op_index += 1
                if not isinstance(op, Mapping) or not isinstance(op.get("op"), str):
                    raise TransformError(
                        f"expected each applyOps element to be a document with a string op, "
                        f"got {op!r:.100}",
                        code=5543808,
                    )
                if op["op"] == "n":
                    raise TransformError(
                        "expected no no-op entry inside applyOps, got one", code=5543809
                    )
                if not self._matches_op(op):
                    continue
                yield {
                    **op,
                    f.TXN_OP_INDEX: index,
                    f.APPLY_OPS_INDEX: apply_ops_index,
                    f.APPLY_OPS_TS: holder.get("ts"),
                    "ts": commit_ts,
                    "wall": entry.get("wall"),
                    **({f.COMMIT_TIMESTAMP: commit_timestamp} if commit_timestamp else {}),
                    **session,
                }
        self._forget_chain(entry)

    def _applied_separately(self, entry: Mapping[str, Any]) -> bool:
        """Whether ``entry`` is a retryable write's applyOps (``multiOpType: 1``, 8.0+).

        Its ops are no transaction: the prevOpTime chain is not followed and no
        lsid / txnNumber is copied into its events.
        """
        if not self._reads_multi_op_type or "multiOpType" not in entry:
            return False
        multi_op_type = entry["multiOpType"]
        if type(multi_op_type) is not int:  # int32 only (Int64 and bool are other types)
            raise TransformError(
                f'Entry field "multiOpType" should be int, found {multi_op_type!r:.40}',
                code=40532,
            )
        return multi_op_type == 1

    def _chain_before(self, entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The earlier entries of ``entry``'s transaction, oldest first."""
        chain: list[Mapping[str, Any]] = []
        ts = _prev_ts(entry)
        holder = entry
        while ts is not None:
            # A transaction's earlier entry is earlier in the oplog; a pointer that is not
            # would make the walk circle for ever (the server's walk has no such guard).
            holder_ts = holder.get("ts")
            if isinstance(holder_ts, Timestamp) and ts >= holder_ts:
                raise TransformError(
                    f"expected prevOpTime before its entry's ts {holder_ts!r} in a "
                    f"transaction's chain, got {ts!r}"
                )
            earlier = self._partial.get(ts)
            if earlier is None and self._history is not None:
                earlier = self._history.fetch_entry(ts)
            if earlier is None:
                raise TransformError(
                    f"expected the transaction entry at prevOpTime {ts!r} (read back by "
                    f"optime, as mongod does), but the oplog source does not have it",
                    code=286,  # ChangeStreamHistoryLost
                )
            chain.append(earlier)
            holder, ts = earlier, _prev_ts(earlier)
        chain.reverse()
        return chain

    def _forget_chain(self, entry: Mapping[str, Any]) -> None:
        ts = _prev_ts(entry)
        while ts is not None and ts in self._partial:
            ts = _prev_ts(self._partial.pop(ts))


def _session_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry's lsid (a document) and txnNumber (int64); either may be missing."""
    session: dict[str, Any] = {}
    for name, expected, type_name in ((f.LSID, Mapping, "object"), (f.TXN_NUMBER, Int64, "long")):
        if name in entry:
            if not isinstance(entry[name], expected):
                raise TransformError(
                    f'Entry field "{name}" should be {type_name}, found {entry[name]!r:.60}',
                    code=40532,
                )
            session[name] = entry[name]
    return session


def _prev_ts(entry: Mapping[str, Any]) -> Timestamp | None:
    optime = entry.get("prevOpTime")
    if not isinstance(optime, Mapping):
        return None
    ts = optime.get("ts")
    if not isinstance(ts, Timestamp) or ts == _NULL_TS:
        return None
    return ts
