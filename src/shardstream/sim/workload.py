"""Simulator: single-document writes, each routed to the shard owning the document's chunk.

A step picks a shard that may take writes (not idle), then a collection and chunk it
owns, then a document, so idle shards simply receive nothing.  Updates are ``$v:2``
deltas applied with :func:`shardstream.transform.update.apply_update.apply_update`, the same
code the change-stream side uses, so the true state and a replay agree on field order.
"""

from __future__ import annotations

from typing import Any

from shardstream.sim import entries
from shardstream.sim.chunks import Chunk
from shardstream.sim.collection import CollectionState
from shardstream.sim.documents import random_diff, replacement
from shardstream.sim.world import World
from shardstream.transform.update.apply_update import apply_update

_PICK_ATTEMPTS = 4

Target = tuple[CollectionState, Chunk]


def _chunks_on(world: World, shard: str, *, with_documents: bool, in_txn: bool) -> list[Target]:
    """The (collection, chunk) pairs ``shard`` owns, in a stable order.

    Args:
        world: the cluster.
        shard: the shard.
        with_documents: only chunks holding documents.
        in_txn: only chunks a transaction may touch (not migrating).
    """
    found: list[Target] = []
    for coll in world.collections:
        for chunk in coll.chunks.owned_by(shard):
            if with_documents and not chunk.keys:
                continue
            if in_txn and not chunk.writable_in_transaction:
                continue
            found.append((coll, chunk))
    return found


def pick_document(
    world: World, shard: str, *, in_txn: bool = False
) -> tuple[CollectionState, bytes] | None:
    """A random unlocked document ``shard`` owns (chunks weighted by size), or None."""
    candidates = _chunks_on(world, shard, with_documents=True, in_txn=in_txn)
    if not candidates:
        return None
    total = sum(len(chunk.keys) for _, chunk in candidates)
    for _ in range(_PICK_ATTEMPTS):
        draw = world.rng.randrange(total)
        for coll, chunk in candidates:
            if draw < len(chunk.keys):
                key = chunk.keys.pick(world.rng)
                if (coll.name, key) not in world.locked:
                    return coll, key
                break
            draw -= len(chunk.keys)
    return None


def make_document(
    world: World, shard: str, *, in_txn: bool = False
) -> tuple[CollectionState, dict[str, Any]] | None:
    """A new document that routes to ``shard`` (in a random collection it owns chunks of)."""
    candidates = _chunks_on(world, shard, with_documents=False, in_txn=in_txn)
    if not candidates:
        return None
    names = list(dict.fromkeys(coll.name for coll, _ in candidates))
    name = world.rng.choice(names)
    coll, chunk = world.rng.choice([pair for pair in candidates if pair[0].name == name])
    document = coll.make_document(world.rng, chunk)
    return None if document is None else (coll, document)


def _existing(world: World) -> tuple[str, CollectionState, bytes] | None:
    shards = world.writable_shards()
    for shard in world.rng.sample(shards, len(shards)):
        found = pick_document(world, shard)
        if found is not None:
            return shard, *found
    return None


def insert_step(world: World) -> bool:
    """Insert a new document; False if no shard could take one."""
    shards = world.writable_shards()
    if not shards:
        return False
    shard = world.rng.choice(shards)
    found = make_document(world, shard)
    if found is None:
        return False
    coll, document = found
    world.write(shard, entries.insert(coll.ns, coll.ui, document, coll.document_key(document)))
    coll.add(document)
    world.tally.crud_writes += 1
    return True


def update_step(world: World) -> bool:
    """Apply a ``$v:2`` delta to an existing document; False if there is none to update."""
    found = _existing(world)
    if found is None:
        return False
    shard, coll, key = found
    before = coll.docs[key]
    diff = random_diff(
        world.rng, before, coll.protected_fields, world.config.nested_update_fraction
    )
    body = entries.update(coll.ns, coll.ui, diff, coll.document_key(before))
    world.write(shard, body)
    coll.put(apply_update(before, body["o"]))
    world.tally.crud_writes += 1
    return True


def replace_step(world: World) -> bool:
    """Replace an existing document (same ``_id`` and shard key); False if there is none."""
    found = _existing(world)
    if found is None:
        return False
    shard, coll, key = found
    before = coll.docs[key]
    after = replacement(world.rng, before, coll.protected_fields)
    world.write(shard, entries.replace(coll.ns, coll.ui, after, coll.document_key(before)))
    coll.put(after)
    world.tally.crud_writes += 1
    return True


def delete_step(world: World) -> bool:
    """Delete an existing document; False if there is none."""
    found = _existing(world)
    if found is None:
        return False
    shard, coll, key = found
    world.write(shard, entries.delete(coll.ns, coll.ui, coll.document_key(coll.docs[key])))
    coll.remove(key)
    world.tally.crud_writes += 1
    return True
