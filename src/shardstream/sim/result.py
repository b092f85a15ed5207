"""Simulator: what a run produced: per-shard oplogs, the true final contents, and counts.

The oplogs can be written out as ``<shard>.oplog.bson`` files, concatenated BSON
documents as ``mongodump`` writes ``local.oplog.rs``, which
:func:`shardstream.oplog.read_oplog_file` reads back.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import bson
from bson.binary import Binary
from bson.timestamp import Timestamp

from shardstream.sim.config import SimulationConfig


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MigrationRecord:
    """One committed chunk migration.

    Attributes:
        ns: the collection namespace.
        lower / upper: the chunk's range of positions (None is MinKey / MaxKey);
            positions are first shard-key values, or their hashes for hashed keys.
        donor / recipient: the shards the chunk moved from and to.
        commit_ts: the donor's clock at the commit: the donor's writes to the range are
            at or below it, the recipient's later ones above it.
        document_keys: the keys of the documents that moved (the donor later deletes
            its copies, ``fromMigrate``).
    """

    ns: str
    lower: Any
    upper: Any
    donor: str
    recipient: str
    commit_ts: Timestamp
    document_keys: tuple[Mapping[str, Any], ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SimulationCounters:
    """Counts of what a run did.

    Attributes:
        entries: oplog entries per shard.
        crud_writes: inserts, updates, replacements and deletes outside transactions
            (``fromMigrate`` ones not included).
        transactions: committed transactions; ``multi_shard_transactions`` and
            ``large_transactions`` (split into ``partialTxn`` entries) count subsets.
        migrations: committed chunk migrations; ``migrated_documents`` the documents moved.
        periodic_noops: periodic no-ops written, all shards together.
        collmods: ``collMod`` entries written.
        equal_timestamps: distinct timestamps found in the oplogs of two or more shards.
    """

    entries: Mapping[str, int]
    crud_writes: int
    transactions: int
    multi_shard_transactions: int
    large_transactions: int
    migrations: int
    migrated_documents: int
    periodic_noops: int
    collmods: int
    equal_timestamps: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SimulationResult:
    """The output of :meth:`SimulatedCluster.run`.

    Attributes:
        config: the configuration of the run.
        oplogs: each shard's oplog entries in ``ts`` order (shards in name order, an
            added shard last).
        final_state: the true final contents of every collection,
            ``{(db, coll): {id_key(_id): document}}`` (see :func:`id_key`).
        shard_added: when each shard joined: a ``Timestamp`` below all its entries (for
            the initial shards, the start of the run).
        counters: counts of what happened.
        migrations: the committed migrations, in commit order.
        chunk_owners: each sharded namespace's final chunks as ``(lower, upper, owner)``.
        collection_uuids: each namespace's collection UUID (BinData subtype 4).
    """

    config: SimulationConfig
    oplogs: Mapping[str, Sequence[Mapping[str, Any]]]
    final_state: Mapping[tuple[str, str], Mapping[bytes, Mapping[str, Any]]]
    shard_added: Mapping[str, Timestamp]
    counters: SimulationCounters
    migrations: tuple[MigrationRecord, ...]
    chunk_owners: Mapping[str, tuple[tuple[Any, Any, str], ...]]
    collection_uuids: Mapping[str, Binary]

    def write_oplogs(self, directory: str | Path) -> dict[str, Path]:
        """Write each shard's oplog to ``<directory>/<shard>.oplog.bson``.

        Returns:
            The path written for each shard.
        """
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        paths: dict[str, Path] = {}
        for shard, oplog in self.oplogs.items():
            path = target / f"{shard}.oplog.bson"
            path.write_bytes(b"".join(bson.encode(entry) for entry in oplog))
            paths[shard] = path
        return paths


def count_equal_timestamps(oplogs: Mapping[str, Sequence[Mapping[str, Any]]]) -> int:
    """How many distinct timestamps occur in the oplogs of two or more shards."""
    # Counted as (time, inc) pairs: bson's Timestamp hashes as time ^ inc, so an oplog's
    # timestamps (one time, many increments) collide in whole runs, quadratically.
    seen: Counter[tuple[int, int]] = Counter()
    for oplog in oplogs.values():
        seen.update({(entry["ts"].time, entry["ts"].inc) for entry in oplog})
    return sum(1 for count in seen.values() if count > 1)
