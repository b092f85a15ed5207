"""Sync: a batch of planned writes applied by N parallel writers, in a safe order.

A batch is cut into segments at each DDL event, a barrier: everything before it is
acknowledged, then it runs alone (:mod:`~shardstream.cluster_sync.batch_segments`, which
also puts a DDL event inside a transaction ahead of it). Within a segment the writes go
out through ``writers`` lanes (:mod:`~shardstream.cluster_sync.writer_lanes`), each write
routed by a hash of (target namespace, ``_id``): one document's writes stay in order on
one lane while different documents go in parallel, as ordered write commands per namespace
(:mod:`~shardstream.cluster_sync.statement_commands`). A source transaction is by default
applied inside one transaction on the target (all its events commit together; consecutive
ones may share it), a step every lane takes together (see ``writer_lanes``).

Every write is idempotent, so a write the target may or may not have taken before a
connection dropped is simply sent again: connection errors are retried with exponential
backoff for ``retry_for_s`` seconds, without reordering anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Final, TypeVar

from pymongo import MongoClient
from pymongo.client_session import ClientSession
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError
from pymongo.write_concern import WriteConcern

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange
from shardstream.cluster_sync.batch_segments import Barrier, batch_steps
from shardstream.cluster_sync.conflict_log import ConflictLog
from shardstream.cluster_sync.ddl_apply import apply_ddl
from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.cluster_sync.refused_writes import RefusedWrites, refused_index
from shardstream.cluster_sync.statement_commands import send_statements
from shardstream.cluster_sync.target_retry import DEFAULT_RETRY_FOR_S, retrying
from shardstream.cluster_sync.target_shard_key import (
    TargetShardKeys,
    addressed_models,
    addressed_update,
    current_key_values,
    transaction_segments,
)
from shardstream.cluster_sync.writer_lanes import (
    SegmentItem,
    by_command,
    by_namespace,
    plan_lanes,
    run_lanes,
)
from shardstream.resume_token import ResumeToken

MAJORITY: Final = WriteConcern("majority")
CONFLICT_POLICIES: Final = ("fail", "overwrite", "skip")
# DDL events after which a target collection's shard key may differ (read again).
PLACEMENT_DDL: Final = frozenset({"shardCollection", "create", "drop", "rename", "dropDatabase"})
_READDRESSED_TRIES: Final = 3
_T = TypeVar("_T")


class BatchApplier:
    """Applies planned writes to the target; one per sync, reused for every batch."""

    def __init__(
        self,
        client: MongoClient[Any],
        namespaces: NamespaceMap,
        *,
        writers: int,
        transactions: bool = True,
        on_conflict: str = "fail",
        shard_target: bool = False,
        retry_for_s: float = DEFAULT_RETRY_FOR_S,
        conflict_log: ConflictLog | None = None,
    ) -> None:
        """Create the writer pool.

        Args:
            client: connected to the target (mongos or replica set).
            namespaces: scope and mapping, for DDL events.
            writers: parallel writer threads (>= 1).
            transactions: apply a source transaction inside one target transaction.
            on_conflict: ``fail``, ``overwrite`` (delete the document holding the key,
                then write) or ``skip`` (drop the event's write).
            shard_target: apply ``shardCollection`` events to the target.
            retry_for_s: how long connection failures are retried before giving up.
            conflict_log: where skipped and overwritten writes are recorded (default:
                ``shardstream_sync.conflicts`` under the sync id ``default``).
        """
        if writers < 1:
            raise ValueError(f"expected writers >= 1, got {writers}")
        if on_conflict not in CONFLICT_POLICIES:
            raise ValueError(f"expected on_conflict in {CONFLICT_POLICIES}, got {on_conflict!r}")
        self._client = client
        self._namespaces = namespaces
        self._writers = writers
        self._transactions = transactions
        self._on_conflict = on_conflict
        self._shard_target = shard_target
        self._retry_for_s = retry_for_s
        self._pool = ThreadPoolExecutor(writers, thread_name_prefix="shardstream-writer")
        self._collections: dict[Namespace, Collection[Any]] = {}
        self._shard_keys = TargetShardKeys(client)
        self.conflict_log = conflict_log or ConflictLog(
            client, "default", on_conflict, retry_for_s=retry_for_s
        )
        self._refusals = RefusedWrites(
            self._shard_keys, self.conflict_log, on_conflict, self._collection, retry_for_s
        )

    @property
    def conflicts(self) -> int:
        """Writes skipped or overwritten under the conflict policy (each one recorded)."""
        return self.conflict_log.count

    def close(self) -> None:
        """Stop the writer threads."""
        self._pool.shutdown(wait=True)

    def apply(
        self,
        items: Sequence[CrudWrite | DdlChange],
        checkpoint: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        """Apply ``items`` in stream order; return once the target acknowledged them all.

        ``checkpoint(token)`` stores a resume token; it is called on each side of a DDL
        event (after the writes before it, then after it), so a run killed around a DDL
        event replays it onto the target exactly as it was just before or just after it.
        Replayed over later writes instead, a rename with ``dropTarget`` would drop the
        renamed collection for one recreated by the replayed writes to its old name.  A
        DDL event inside a transaction gets only the first: after it, the transaction's
        writes are still to come.
        """
        for step in batch_steps(items, self._transactions):
            if isinstance(step, Barrier):
                self._barrier(step, checkpoint)
            else:
                self._parallel(step)

    def _barrier(
        self, step: Barrier, checkpoint: Callable[[Mapping[str, Any]], None] | None
    ) -> None:
        """Apply a DDL event alone, between checkpoints (see :meth:`apply`)."""
        before = step.before
        if (
            checkpoint is not None
            and before is not None
            and ResumeToken.from_document(before) < ResumeToken.from_document(step.floor)
        ):
            # Not when a regrouped transaction put a later event first (events of one
            # cluster time, from other shards): resuming after it would skip the DDL
            # event or the transaction's first writes. The batch's previous checkpoint
            # then stands.
            checkpoint(before)
        event = step.ddl.event
        shard_target = self._shard_target
        self._retrying(
            partial(apply_ddl, self._client, event, self._namespaces, shard_target=shard_target)
        )
        if event.get("operationType") in PLACEMENT_DDL:
            self._retrying(self._shard_keys.refresh)
        if checkpoint is not None and step.settles:
            checkpoint(step.ddl.event["_id"])

    # -- document writes ---------------------------------------------------------------

    def _parallel(self, segment: list[SegmentItem]) -> None:
        if segment:
            plan = plan_lanes(segment, self._writers)
            run_lanes(self._pool, plan, self._lane, self._transaction)

    def _lane(self, writes: list[CrudWrite]) -> None:
        for target, group in by_namespace(writes):
            for run in by_command(group):
                self._bulk(target, run)

    def _bulk(self, target: Namespace, writes: list[CrudWrite]) -> None:
        collection = self._collection(target)
        start = 0
        while start < len(writes):
            chunk = writes[start:]
            fields = self._shard_keys.fields(target)
            send: Callable[[], object]
            owners: Sequence[int]
            if fields:  # addressed by the target's own key: pymongo's models
                models, owners = addressed_models(chunk, fields, self._shard_keys.pinned(target))
                send = partial(collection.bulk_write, models)
            else:  # as planned: the statements themselves
                owners, send = range(len(chunk)), partial(send_statements, collection, chunk)
            try:
                self._retrying(send)
                self._shard_keys.unpin(target, writes)
                return
            except BulkWriteError as exc:
                index = owners[refused_index(exc)]
                if self._refusals.readdressed(target, fields, chunk[index], exc):
                    start += index  # everything before it was applied, in order
                    continue
                key = self._refusals.conflict(target, chunk[index], exc)
                if self._on_conflict == "overwrite":
                    self._retrying(partial(collection.delete_many, key))
                    start += index  # the refused write goes again, now unopposed
                else:
                    start += index + 1

    def _transaction(self, writes: list[CrudWrite]) -> None:
        # The piece being written, with each model's index in its namespace group: a
        # BulkWriteError's index counts in the piece, so a conflict names the refused write.
        current: list[tuple[Namespace, list[CrudWrite], tuple[str, ...], Sequence[int]]] = []

        def body(session: ClientSession) -> None:
            for target, group in by_namespace(writes):
                fields = self._shard_keys.fields(target)
                collection = self._collection(target)
                for offset, piece, read in transaction_segments(group, fields):
                    if not fields:  # as planned: the statements themselves
                        current[:] = [(target, group, fields, range(offset, offset + len(piece)))]
                        send_statements(collection, piece, session)
                        continue
                    if read:  # an update of an addressed collection, by its current key
                        values = current_key_values(collection, piece[0], fields, session)
                        models, owners = [addressed_update(piece[0], values)], [0]
                    else:
                        models, owners = addressed_models(piece, fields)
                    current[:] = [(target, group, fields, [offset + n for n in owners])]
                    collection.bulk_write(models, ordered=True, session=session)

        def run() -> None:
            with self._client.start_session() as session:
                session.with_transaction(body, write_concern=MAJORITY)

        # Again while keys read at a refusal address it better (each try follows a change).
        for attempt in range(_READDRESSED_TRIES):
            try:
                self._retrying(run)
                return
            except BulkWriteError as exc:
                target, group, fields, owners = current[0]  # set before a write fails
                write = group[owners[refused_index(exc)]]
                last = attempt == _READDRESSED_TRIES - 1
                if not last and self._refusals.readdressed(target, fields, write, exc, pin=False):
                    continue
                if self._on_conflict == "fail":
                    self._refusals.conflict(target, write, exc)
                break
        # Under a conflict policy the transaction's writes go one by one instead.
        for target, group in by_namespace(writes):
            self._bulk(target, group)

    def _collection(self, target: Namespace) -> Collection[Any]:
        # One per namespace for the sync's life: building it per bulk write showed in
        # the profile (a database and a collection object each time).
        collection = self._collections.get(target)
        if collection is None:
            collection = self._client[target[0]].get_collection(target[1], write_concern=MAJORITY)
            self._collections[target] = collection
        return collection

    def _retrying(self, call: Callable[[], _T]) -> _T:
        return retrying(call, self._retry_for_s)
