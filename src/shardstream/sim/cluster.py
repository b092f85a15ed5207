"""Simulator: a deterministic sharded cluster that writes per-shard oplogs from a workload.

:class:`SimulatedCluster` sets the cluster up (collections created on the primary
shard, sharded, and their chunks spread over the shards by migrations, as the
balancer would), then runs the workload step by step: inserts, ``$v:2`` updates,
replacements, deletes, transactions and chunk migrations, plus a ``collMod``,
periodic no-ops, idle stretches and a shard added mid-run, as configured.  At the
end every open transaction, migration and range deletion is finished, and wall
time runs on long enough for each shard to write a final periodic no-op.

What it does not model: chunk splits and merges, shard-key updates, retryable
writes, aborted transactions, elections (terms stay 1), drops and renames,
resharding, and write conflicts (documents of open transactions are locked instead).
"""

from __future__ import annotations

from bson.timestamp import Timestamp

from shardstream.sim import ddl
from shardstream.sim.chunks import ChunkMap, hashed_bounds, range_bounds
from shardstream.sim.collection import CollectionState
from shardstream.sim.config import PRIMARY_SHARD, SimulationConfig
from shardstream.sim.migrations import migration_step, start_migration
from shardstream.sim.result import SimulationCounters, SimulationResult, count_equal_timestamps
from shardstream.sim.transactions import transaction_step
from shardstream.sim.workload import delete_step, insert_step, replace_step, update_step
from shardstream.sim.world import Pending, World

_STEPS = {
    "p_insert": insert_step,
    "p_update": update_step,
    "p_replace": replace_step,
    "p_delete": delete_step,
    "p_transaction": transaction_step,
    "p_migration": migration_step,
}


class SimulatedCluster:
    """A sharded cluster running a seeded workload.

    Args:
        config: what to simulate.

    >>> result = SimulatedCluster(SimulationConfig(operations=50)).run()
    >>> sorted(result.oplogs)
    ['shard0', 'shard1', 'shard2']
    """

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config

    def run(self) -> SimulationResult:
        """Run the whole workload and return the oplogs and the true final state."""
        config = self.config
        world = World(config)
        self._set_up(world)
        kinds = list(_STEPS)
        weights = [getattr(config, name) for name in kinds]
        collmod_step = (
            None if config.collmod_at is None else int(config.collmod_at * config.operations)
        )
        new_shard: str | None = None
        for step in range(config.operations):
            world.step = step
            world.advance(world.rng.randint(1, config.max_step_ms))
            if step == config.add_shard_at:
                new_shard = self._add_shard(world)
            self._finish_due(world)
            if step == collmod_step:
                for coll in world.collections:
                    ddl.coll_mod(world, coll, PRIMARY_SHARD)
            if new_shard is not None and step > (config.add_shard_at or 0):
                # The balancer soon gives a new shard chunks; force that until it has one.
                if any(coll.chunks.owned_by(new_shard) for coll in world.collections):
                    new_shard = None
                elif migration_step(world, recipient=new_shard):
                    continue
            (kind,) = world.rng.choices(kinds, weights)
            if not _STEPS[kind](world) and kind != "p_insert":
                insert_step(world)
        self._drain(world)
        world.advance(2 * config.noop_interval_secs * 1000 + 1)
        return self._result(world)

    def _set_up(self, world: World) -> None:
        config = world.config
        start = Timestamp(config.start_time, 0)
        for name in config.shard_names:
            world.add_shard(name, start)
            # Like a real replica set's first entry: a shard's oplog reaches back before any
            # write, so streams that start (or resume) inside the run find their history.
            world.write(name, {"op": "n", "ns": "", "o": {"msg": "initiating set"}})
        for spec in config.collections:
            count = config.chunks_per_collection if spec.sharded else 1
            bounds: list[object] = []
            if spec.sharded:
                bounds = list(hashed_bounds(count) if spec.hashed else range_bounds(count))
            chunks = ChunkMap(bounds, PRIMARY_SHARD, movable=spec.sharded)
            prefix = config.start_time.to_bytes(4, "big")
            coll = CollectionState(spec, config.database, world.new_uuid(), chunks, prefix)
            world.collections.append(coll)
            ddl.ensure_collection(world, PRIMARY_SHARD, coll, fm=False)
            if spec.sharded:
                ddl.shard_collection(world, PRIMARY_SHARD, coll)
        # The balancer's first round: spread each sharded collection's (empty) chunks.
        for coll in world.collections:
            if not coll.spec.sharded:
                continue
            for index, chunk in enumerate(coll.chunks.chunks):
                target = config.shard_names[index % config.shards]
                if target != chunk.owner:
                    start_migration(world, coll, chunk, target, immediately=True)

    def _add_shard(self, world: World) -> str:
        name = world.config.added_shard
        assert name is not None  # add_shard_at is set, so the config names the new shard
        # The config server learnt every shard's time by gossip; the new shard starts after it.
        added_at = max(shard.clock.last for shard in world.shards.values())
        world.add_shard(name, added_at)
        world.write(name, {"op": "n", "ns": "", "o": {"msg": "initiating set"}})
        return name

    def _finish_due(self, world: World, *, everything: bool = False) -> None:
        # Finishing a migration schedules its range deletion, which may be due at once.
        while True:
            due: list[Pending] = []
            waiting: list[Pending] = []
            for item in world.pending:
                # Work touching a shard that is going idle is finished first, so its idle
                # stretch holds nothing but periodic no-ops.
                forced = any(world.is_idle(shard) for shard in item.shards)
                ready = everything or forced or item.due_step <= world.step
                (due if ready else waiting).append(item)
            world.pending = waiting
            if not due:
                return
            for item in due:
                item.finish(world)

    def _drain(self, world: World) -> None:
        self._finish_due(world, everything=True)

    def _result(self, world: World) -> SimulationResult:
        oplogs = {name: shard.oplog for name, shard in world.shards.items()}
        tally = world.tally
        counters = SimulationCounters(
            entries={name: len(oplog) for name, oplog in oplogs.items()},
            crud_writes=tally.crud_writes,
            transactions=tally.transactions,
            multi_shard_transactions=tally.multi_shard_transactions,
            large_transactions=tally.large_transactions,
            migrations=tally.migrations,
            migrated_documents=tally.migrated_documents,
            periodic_noops=tally.periodic_noops,
            collmods=tally.collmods,
            equal_timestamps=count_equal_timestamps(oplogs),
        )
        return SimulationResult(
            config=world.config,
            oplogs=oplogs,
            final_state={(coll.db, coll.name): dict(coll.docs) for coll in world.collections},
            shard_added=dict(world.shard_added),
            counters=counters,
            migrations=tuple(world.migration_log),
            chunk_owners={
                coll.ns: tuple((c.lower, c.upper, c.owner) for c in coll.chunks.chunks)
                for coll in world.collections
                if coll.spec.sharded
            },
            collection_uuids={coll.ns: coll.ui for coll in world.collections},
        )
