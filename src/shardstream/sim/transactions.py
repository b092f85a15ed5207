"""Simulator: transactions, single-shard (one ``applyOps``) and multi-shard (two-phase commit).

* A single-shard transaction commits without preparing: one ``applyOps`` entry, or
  for a large one a chain of ``partialTxn`` entries whose last entry (no
  ``partialTxn``) commits, each linked to the one before by ``prevOpTime``.
* A multi-shard transaction is prepared on every participant (its chain ends with a
  ``prepare: true`` entry) and stays open for a few steps while other writes go on.
  The coordinator then picks the commit timestamp, the highest of the participants'
  clocks, and every participant writes ``commitTransaction`` at exactly that ``ts``
  with ``commitTimestamp`` equal to it.  So one transaction shows the same
  ``clusterTime`` on every shard, and equal timestamps across shards are guaranteed.

Documents in an open prepared transaction are locked (other writes skip them) and
their chunks pinned (no migration until the commit), as prepare conflicts and the
migration's critical section do on a real cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bson.timestamp import Timestamp

from shardstream.sim import entries
from shardstream.sim.chunks import Chunk
from shardstream.sim.collection import CollectionState
from shardstream.sim.documents import id_key, random_diff
from shardstream.sim.workload import make_document, pick_document
from shardstream.sim.world import Session, World
from shardstream.transform.update.apply_update import apply_update

_NULL_TS = Timestamp(0, 0)


@dataclasses.dataclass(eq=False, slots=True)
class TxnOp:
    """One operation of a transaction and its effect on the true state."""

    coll: CollectionState
    chunk: Chunk
    key: bytes
    after: dict[str, Any] | None  # None: a delete
    is_insert: bool
    body: dict[str, Any]  # the op as it sits inside applyOps


def _build_ops(world: World, shard: str, count: int) -> list[TxnOp]:
    """Up to ``count`` operations on distinct documents ``shard`` owns; locks them."""
    rng = world.rng
    ops: list[TxnOp] = []
    for _ in range(count):
        kind = rng.random()
        op: TxnOp | None = None
        if kind >= 0.4:
            found = pick_document(world, shard, in_txn=True)
            if found is not None:
                coll, key = found
                before = coll.docs[key]
                document_key = coll.document_key(before)
                if kind < 0.8:
                    diff = random_diff(rng, before, coll.protected_fields, 0.3)
                    body = entries.update(coll.ns, coll.ui, diff, document_key)
                    after: dict[str, Any] | None = apply_update(before, body["o"])
                else:
                    body, after = entries.delete(coll.ns, coll.ui, document_key), None
                op = TxnOp(coll, coll.chunk_of(before), key, after, False, entries.inner(body))
        if op is None:
            made = make_document(world, shard, in_txn=True)
            if made is None:
                continue
            coll, document = made
            body = entries.insert(coll.ns, coll.ui, document, coll.document_key(document))
            key = id_key(document["_id"])
            op = TxnOp(coll, coll.chunk_of(document), key, document, True, entries.inner(body))
        world.locked.add((op.coll.name, op.key))
        ops.append(op)
    return ops


def _apply(world: World, ops: list[TxnOp]) -> None:
    for op in ops:
        if op.is_insert and op.after is not None:
            op.coll.add(op.after)
        elif op.after is not None:
            op.coll.put(op.after)
        else:
            op.coll.remove(op.key)
        world.locked.discard((op.coll.name, op.key))


def _write_chain(
    world: World, shard: str, session: dict[str, Any], ops: list[TxnOp], large: bool, prepare: bool
) -> Timestamp:
    """Write a participant's applyOps chain; return the ``ts`` of its last entry."""
    per_entry = len(ops)
    if large and len(ops) > 1:
        per_entry = max(1, min(world.config.max_ops_per_entry, len(ops) - 1))
    groups = [ops[i : i + per_entry] for i in range(0, len(ops), per_entry)]
    prev = _NULL_TS
    for index, group in enumerate(groups):
        last = index == len(groups) - 1
        body = entries.apply_ops(
            session,
            [op.body for op in group],
            partial=not last,
            prepare=last and prepare,
        )
        prev = world.write(shard, body, prev)
    return prev


@dataclasses.dataclass(eq=False, slots=True)
class PreparedTransaction:
    """A multi-shard transaction prepared on its participants, waiting for its commit."""

    session: Session
    fields: dict[str, Any]  # lsid, txnNumber
    ops: dict[str, list[TxnOp]]  # per participant, in participant order
    prepare_ts: dict[str, Timestamp]
    due_step: int

    @property
    def shards(self) -> tuple[str, ...]:
        """The participants."""
        return tuple(self.ops)

    def finish(self, world: World) -> None:
        """Commit at one timestamp on every participant, then apply the effects."""
        commit_ts = max(world.shards[shard].clock.peek(world.wall_secs) for shard in self.ops)
        for shard, ops in self.ops.items():
            body = entries.commit_transaction(self.fields, commit_ts)
            world.shards[shard].write_at(body, commit_ts, self.prepare_ts[shard])
            _apply(world, ops)
            for op in ops:
                op.chunk.pins -= 1
        self.session.busy = False


def transaction_step(world: World) -> bool:
    """Run one transaction (committed now, or prepared and committed later)."""
    rng, config = world.rng, world.config
    shards = world.writable_shards()
    if not shards:
        return False
    multi = len(shards) > 1 and rng.random() < config.multi_shard_fraction
    if multi:
        participants = rng.sample(shards, rng.randint(2, min(3, len(shards))))
    else:
        participants = [rng.choice(shards)]
    large = rng.random() < config.large_transaction_fraction
    low = 2 if large else 1
    high = max(low, config.max_transaction_ops)
    ops = {shard: _build_ops(world, shard, rng.randint(low, high)) for shard in participants}
    ops = {shard: shard_ops for shard, shard_ops in ops.items() if shard_ops}
    if not ops:
        return False
    session = world.session()
    fields = session.begin()
    world.tally.transactions += 1
    world.tally.large_transactions += large
    if len(ops) == 1:
        ((shard, shard_ops),) = ops.items()
        _write_chain(world, shard, fields, shard_ops, large, prepare=False)
        _apply(world, shard_ops)
        session.busy = False
        return True
    world.tally.multi_shard_transactions += 1
    coordinator = next(iter(ops))
    prepare_ts: dict[str, Timestamp] = {}
    for shard, shard_ops in ops.items():
        # The coordinator's prepare request carries its cluster time (HLC rule).
        world.message(coordinator, shard)
        prepare_ts[shard] = _write_chain(world, shard, fields, shard_ops, large, prepare=True)
        for op in shard_ops:
            op.chunk.pins += 1
    due = world.step + rng.randint(1, max(1, config.max_pending_steps))
    world.pending.append(PreparedTransaction(session, fields, ops, prepare_ts, due))
    return True
