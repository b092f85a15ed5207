"""Simulator: the DDL a shard writes: create, createIndexes, shardCollection and collMod.

The primary shard creates every collection (``create``, then one ``createIndexes``
per index, as a build on an empty collection logs it) and, for a sharded one,
writes the ``shardCollection`` no-op.  Another shard creates a sharded collection
when its first chunk arrives; a migration recipient logs those entries as
``fromMigrate`` [inferred from the oplog filter's exception for ``fromMigrate``
create/createIndexes in change_stream_filter_helpers.cpp], so a change stream sees one ``create``.
"""

from __future__ import annotations

from typing import Any

from bson.int64 import Int64

from shardstream.sim import entries
from shardstream.sim.collection import CollectionState
from shardstream.sim.world import World

_ID_INDEX = {"v": 2, "key": {"_id": 1}, "name": "_id_"}
_SECONDARY_INDEX = "status_1"


def _shard_key_pattern(coll: CollectionState) -> dict[str, Any]:
    """The shard-key pattern, e.g. ``{region: 1, _id: 1}`` or ``{uid: "hashed"}``."""
    spec = coll.spec
    return {
        name: "hashed" if spec.hashed and position == 0 else 1
        for position, name in enumerate(spec.shard_key)
    }


def _index_specs(coll: CollectionState) -> list[dict[str, Any]]:
    """The collection's indexes besides ``_id``: the shard-key index, then ``status_1``."""
    specs: list[dict[str, Any]] = []
    if coll.spec.sharded:
        pattern = _shard_key_pattern(coll)
        name = "_".join(f"{field}_{kind}" for field, kind in pattern.items())
        specs.append({"v": 2, "key": pattern, "name": name})
    specs.append({"v": 2, "key": {"status": 1}, "name": _SECONDARY_INDEX})
    return specs


def ensure_collection(world: World, shard: str, coll: CollectionState, *, fm: bool) -> None:
    """Create ``coll`` on ``shard`` unless it is there already (``fm``: as fromMigrate)."""
    created = world.shards[shard].collections
    if coll.name in created:
        return
    db = coll.db
    world.write(
        shard, entries.command(db, coll.ui, {"create": coll.name, "idIndex": _ID_INDEX}, fm=fm)
    )
    for spec in _index_specs(coll):
        world.write(
            shard, entries.command(db, coll.ui, {"createIndexes": coll.name, **spec}, fm=fm)
        )
    created[coll.name] = None


def shard_collection(world: World, primary: str, coll: CollectionState) -> None:
    """Write the ``shardCollection`` no-op on the primary shard (8.0 layout, with ``capped``)."""
    o2 = {
        "shardCollection": coll.ns,
        "shardKey": _shard_key_pattern(coll),
        "unique": False,
        "numInitialChunks": Int64(0),
        "presplitHashedZones": False,
        "capped": False,
    }
    world.write(primary, entries.noop({"shardCollection": coll.ns}, ns=coll.ns, ui=coll.ui, o2=o2))


def coll_mod(world: World, coll: CollectionState, primary: str) -> None:
    """Hide the ``status_1`` index on every shard that has chunks, and the primary.

    Each shard writes its own entry at its own ``ts``, so a change stream shows one
    ``modify`` per shard (``modify`` events are not deduplicated by mongos).
    """
    o = {"collMod": coll.name, "index": {"name": _SECONDARY_INDEX, "hidden": True}}
    o2 = {"collectionOptions_old": {"uuid": coll.ui}, "indexOptions_old": {"hidden": False}}
    owners = coll.chunks.owners()
    for shard in world.shards:
        if shard in owners or shard == primary:
            world.write(shard, entries.command(coll.db, coll.ui, o, o2))
            world.tally.collmods += 1
