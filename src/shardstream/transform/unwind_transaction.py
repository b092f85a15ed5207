"""Layer 2, stage 2: ``applyOps`` and ``commitTransaction`` entries become one op each.

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
    """

    __slots__ = ("_history", "_matches_op", "_partial")

    def __init__(
        self,
        matches_op: Callable[[Mapping[str, Any]], bool],
        history: TransactionHistory | None = None,
    ) -> None:
        self._matches_op = matches_op
        self._history = history
        self._partial: dict[Timestamp, Mapping[str, Any]] = {}

    def remember(self, entry: Mapping[str, Any]) -> None:
        """See every entry (before filtering) so later commits can find their chain.

        Complexity: O(1); an abort or a commit frees its chain.
        """
        if entry.get("op") != "c":
            return
        o = entry.get("o")
        if not isinstance(o, Mapping):
            return
        if isinstance(o.get("applyOps"), list) and (
            o.get("partialTxn") is True or o.get("prepare") is True
        ):
            ts = entry.get("ts")
            if isinstance(ts, Timestamp) and len(self._partial) < _MAX_REMEMBERED:
                self._partial[ts] = entry
        elif "abortTransaction" in o:
            self._forget_chain(entry)

    def is_unwindable(self, entry: Mapping[str, Any]) -> bool:
        """Whether ``entry`` carries ops to unwind (a committing applyOps or a commit)."""
        o = entry.get("o")
        return (
            entry.get("op") == "c"
            and isinstance(o, Mapping)
            and (isinstance(o.get("applyOps"), list) or "commitTransaction" in o)
        )

    def unwind(self, entry: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Yield the ops of the transaction ``entry`` commits, each ready for the transform.

        Every op gets ``txnOpIndex`` (0-based over the whole transaction, counting
        ops the filter drops), ``applyOpsIndex``, ``applyOpsTs``, and the committing
        entry's ``ts`` and ``wall``; transaction ops also ``lsid`` / ``txnNumber``.
        """
        o: Mapping[str, Any] = entry["o"]
        commit_ts = entry.get("ts")
        is_retryable_batch = entry.get("multiOpType") == 1
        chain = [] if is_retryable_batch else self._chain_before(entry)
        if "commitTransaction" in o:
            apply_ops_entries = chain
        else:
            apply_ops_entries = [*chain, entry]
        session: dict[str, Any] = {}
        if not is_retryable_batch:
            for name in (f.LSID, f.TXN_NUMBER):
                if name in entry:
                    session[name] = entry[name]
        commit_timestamp = o.get("commitTimestamp") if "commitTransaction" in o else None
        txn_op_index = 0
        for holder in apply_ops_entries:
            ops = holder["o"].get("applyOps")
            if not isinstance(ops, list):
                raise TransformError(
                    f"expected o.applyOps to be an array in the transaction entry at "
                    f"{holder.get('ts')!r}, got {ops!r:.100}"
                )
            for apply_ops_index, op in enumerate(ops):
                index = txn_op_index
                txn_op_index += 1
                if not isinstance(op, Mapping):
                    raise TransformError(
                        f"expected each applyOps element to be a document, got {op!r:.100}"
                    )
                if op.get("op") == "n":
                    raise TransformError("expected no no-op entry inside applyOps, got one")
                if not self._matches_op(op):
                    continue
                yield {
                    **op,
                    "ts": commit_ts,
                    "wall": entry.get("wall"),
                    f.TXN_OP_INDEX: index,
                    f.APPLY_OPS_INDEX: apply_ops_index,
                    f.APPLY_OPS_TS: holder.get("ts"),
                    **({f.COMMIT_TIMESTAMP: commit_timestamp} if commit_timestamp else {}),
                    **session,
                }
        self._forget_chain(entry)

    def _chain_before(self, entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The earlier entries of ``entry``'s transaction, oldest first."""
        chain: list[Mapping[str, Any]] = []
        ts = _prev_ts(entry)
        while ts is not None:
            earlier = self._partial.get(ts)
            if earlier is None and self._history is not None:
                earlier = self._history.fetch_entry(ts)
            if earlier is None:
                raise TransformError(
                    f"expected the transaction entry at prevOpTime {ts!r} (read back by "
                    f"optime, as mongod does), but the oplog source does not have it",
                )
            chain.append(earlier)
            ts = _prev_ts(earlier)
        chain.reverse()
        return chain

    def _forget_chain(self, entry: Mapping[str, Any]) -> None:
        ts = _prev_ts(entry)
        while ts is not None and ts in self._partial:
            ts = _prev_ts(self._partial.pop(ts))


def _prev_ts(entry: Mapping[str, Any]) -> Timestamp | None:
    optime = entry.get("prevOpTime")
    if not isinstance(optime, Mapping):
        return None
    ts = optime.get("ts")
    if not isinstance(ts, Timestamp) or ts == _NULL_TS:
        return None
    return ts
