"""Simulator: chunk migrations, from the clone to the donor's orphan cleanup.

A migration of one chunk from a donor to a recipient runs over several steps:

1. **Clone**: the recipient (creating the collection first if it has none, as
   ``fromMigrate`` DDL) inserts a snapshot of the chunk's documents as
   ``fromMigrate`` inserts.  The donor keeps owning the chunk and taking writes.
2. **Commit** (a few steps later): the recipient catches up with the writes made
   since the clone (``fromMigrate`` inserts, replacements and deletes, as the
   server's transferMods does); the donor writes the ``migrateChunkToNewShard``
   no-op if the recipient had no chunk of the collection; ownership moves.  The
   recipient's clock is moved past the donor's, so every later write to the
   chunk (on the recipient) has a higher ``ts`` than every earlier one (on the donor).
3. **Range deletion** (a few steps later again): the donor deletes its orphaned
   copies, as ``fromMigrate`` deletes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import bson

from shardstream.sim import entries
from shardstream.sim.chunks import Chunk
from shardstream.sim.collection import CollectionState
from shardstream.sim.ddl import ensure_collection
from shardstream.sim.result import MigrationRecord
from shardstream.sim.world import World


@dataclasses.dataclass(eq=False, slots=True)
class RangeDeletion:
    """The donor's deletion of the documents a committed migration left behind."""

    coll: CollectionState
    chunk: Chunk
    donor: str
    keys: list[dict[str, Any]]  # document keys
    due_step: int

    @property
    def shards(self) -> tuple[str, ...]:
        """The donor."""
        return (self.donor,)

    def finish(self, world: World) -> None:
        """Delete the orphans on the donor."""
        for key in self.keys:
            world.write(self.donor, entries.delete(self.coll.ns, self.coll.ui, key, fm=True))
        self.chunk.cleaning = False


@dataclasses.dataclass(eq=False, slots=True)
class Migration:
    """A migration that has cloned its chunk and waits for its commit."""

    coll: CollectionState
    chunk: Chunk
    donor: str
    recipient: str
    snapshot: dict[bytes, dict[str, Any]]
    due_step: int

    @property
    def shards(self) -> tuple[str, ...]:
        """The donor and the recipient."""
        return (self.donor, self.recipient)

    def finish(self, world: World) -> None:
        """Catch up, commit (ownership moves), and schedule the donor's range deletion."""
        coll, chunk, donor, recipient = self.coll, self.chunk, self.donor, self.recipient
        world.message(donor, recipient)
        current = {key: coll.docs[key] for key in chunk.keys}
        # Catch up with what changed since the clone, as transferMods does.
        for key, cloned in self.snapshot.items():
            if key not in current:
                body = entries.delete(coll.ns, coll.ui, coll.document_key(cloned), fm=True)
                world.write(recipient, body)
        for key, document in current.items():
            before = self.snapshot.get(key)
            document_key = coll.document_key(document)
            if before is None:
                body = entries.insert(coll.ns, coll.ui, document, document_key, fm=True)
            elif bson.encode(before) != bson.encode(document):
                body = entries.replace(coll.ns, coll.ui, document, document_key, fm=True)
            else:
                continue
            world.write(recipient, body)
        if not coll.chunks.owned_by(recipient):
            # Until 8.3 the donor announces a collection's first chunk on a shard this way.
            message = (
                f"Migrating chunk from shard {donor} to shard {recipient} with no chunks for "
                "this collection"
            )
            o2 = {"migrateChunkToNewShard": coll.ns, "fromShardId": donor, "toShardId": recipient}
            world.write(donor, entries.noop(message, ns=coll.ns, ui=coll.ui, o2=o2))
        commit_ts = world.shards[donor].clock.last
        world.message(donor, recipient)
        chunk.owner = recipient
        chunk.migrating = False
        keys = [coll.document_key(document) for document in current.values()]
        world.migration_log.append(
            MigrationRecord(
                ns=coll.ns,
                lower=chunk.lower,
                upper=chunk.upper,
                donor=donor,
                recipient=recipient,
                commit_ts=commit_ts,
                document_keys=tuple(keys),
            )
        )
        world.tally.migrations += 1
        world.tally.migrated_documents += len(keys)
        if keys:
            chunk.cleaning = True
            delay = world.rng.randint(0, world.config.max_pending_steps)
            world.pending.append(RangeDeletion(coll, chunk, donor, keys, world.step + delay))


def start_migration(
    world: World,
    coll: CollectionState,
    chunk: Chunk,
    recipient: str,
    *,
    immediately: bool = False,
) -> None:
    """Clone ``chunk`` to ``recipient``; commit later (or now, with ``immediately``)."""
    donor = chunk.owner
    chunk.migrating = True
    world.message(donor, recipient)
    ensure_collection(world, recipient, coll, fm=True)
    snapshot = {key: coll.docs[key] for key in chunk.keys}
    for document in snapshot.values():
        body = entries.insert(coll.ns, coll.ui, document, coll.document_key(document), fm=True)
        world.write(recipient, body)
    due = world.step + world.rng.randint(1, max(1, world.config.max_pending_steps))
    migration = Migration(coll, chunk, donor, recipient, snapshot, due)
    if immediately:
        migration.finish(world)
    else:
        world.pending.append(migration)


def migration_step(world: World, recipient: str | None = None) -> bool:
    """Start migrating a random movable chunk (to ``recipient`` if given); False if none."""
    shards = world.writable_shards()
    if recipient is not None and recipient not in shards:
        return False
    candidates = [
        (coll, chunk)
        for coll in world.collections
        if coll.chunks.movable
        for chunk in coll.chunks.chunks
        if chunk.movable
        and chunk.owner in shards
        and chunk.owner != recipient
        and (recipient is not None or len(shards) > 1)
    ]
    if not candidates:
        return False
    coll, chunk = world.rng.choice(candidates)
    if recipient is None:
        recipient = world.rng.choice([shard for shard in shards if shard != chunk.owner])
    start_migration(world, coll, chunk, recipient)
    return True
