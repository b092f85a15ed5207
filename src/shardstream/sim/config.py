"""Simulator: the knobs of a simulated sharded cluster, checked when they are built.

A :class:`SimulationConfig` fully determines a run: the same config gives the same
oplogs, byte for byte.  Shards are named ``shard0`` .. ``shard<N-1>``; ``shard0`` is
the database's primary shard, where unsharded collections live.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Final

from shardstream.errors import ConfigurationError

MAX_SHARDS: Final = 64
PRIMARY_SHARD: Final = "shard0"


def _shard_name(index: int) -> str:
    """The name of the shard at ``index`` (its ``config.shards`` ``_id``)."""
    return f"shard{index}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CollectionSpec:
    """One collection of the simulated database.

    Attributes:
        name: the collection name (no ``$``, not ``system.*``).
        shard_key: the shard-key fields in key order; empty for an unsharded collection
            (it lives on the primary shard).  Either ``(field,)``, ``(field, "_id")`` or,
            hashed only, ``("_id",)``.
        hashed: the first shard-key field is hashed (``{field: "hashed"}``), so chunks
            are ranges of its hash rather than of its value.
    """

    name: str
    shard_key: tuple[str, ...] = ()
    hashed: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"expected a non-empty collection name, got {self.name!r}")
        if "$" in self.name or "\0" in self.name or self.name.startswith("system."):
            raise ConfigurationError(
                f"expected a user collection name (no '$', not system.*), got {self.name!r}"
            )
        key = self.shard_key
        if not isinstance(key, tuple) or not all(isinstance(k, str) and k for k in key):
            raise ConfigurationError(f"expected shard_key to be a tuple of names, got {key!r}")
        if not key:
            if self.hashed:
                raise ConfigurationError(f"collection {self.name!r}: hashed needs a shard key")
            return
        if any("." in part or part.startswith("$") for part in key):
            raise ConfigurationError(f"expected top-level shard-key fields, got {key!r}")
        if key[0] == "_id":
            if key != ("_id",) or not self.hashed:
                raise ConfigurationError(
                    f"collection {self.name!r}: _id may only be the whole, hashed shard key "
                    f"(range sharding on a growing _id is not modelled), got {key!r}"
                )
        elif key[1:] not in ((), ("_id",)):
            raise ConfigurationError(
                f"expected shard_key (field,) or (field, '_id'), got {key!r} for {self.name!r}"
            )

    @property
    def sharded(self) -> bool:
        """Whether the collection is sharded."""
        return bool(self.shard_key)


DEFAULT_COLLECTIONS: Final = (
    CollectionSpec(name="orders", shard_key=("region", "_id")),
    CollectionSpec(name="users", shard_key=("uid",), hashed=True),
    CollectionSpec(name="settings"),
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SimulationConfig:
    """Everything a simulated run depends on.

    Attributes:
        seed: seeds every random choice.
        shards: shards at the start (``shard0`` is the primary shard).
        operations: workload steps; each is one operation (a write, a transaction,
            a migration), which may write several oplog entries.
        database: the database name.
        collections: the collections (at least one).
        chunks_per_collection: initial chunks of each sharded collection.
        p_insert / p_update / p_replace / p_delete / p_transaction / p_migration:
            relative probabilities of the step kinds (normalised; the sum must be > 0).
        multi_shard_fraction: share of transactions that span shards (prepared, two-phase).
        large_transaction_fraction: share of transactions split into ``partialTxn`` entries.
        max_ops_per_entry: operations per ``applyOps`` entry of a large transaction.
        max_transaction_ops: operations per transaction participant, at most.
        nested_update_fraction: share of ``$v:2`` updates that carry a sub-diff.
        max_pending_steps: how many steps a prepared transaction, a migration or a range
            deletion stays open, at most.
        collmod_at: when (fraction of the run) every collection gets a ``collMod``; None: never.
        noop_interval_secs: the periodic no-op writer's interval.
        idle_shards: shards that only write periodic no-ops during ``idle_window``.
        idle_window: (start, end) fractions of the run during which ``idle_shards`` are idle.
        add_shard_at: the step at which shard ``shard<shards>`` joins; None: never.
        max_step_ms: simulated wall time between steps, at most (milliseconds).
        start_time: the wall clock at the start (seconds since the epoch).
    """

    seed: int = 0
    shards: int = 3
    operations: int = 1000
    database: str = "shop"
    collections: tuple[CollectionSpec, ...] = DEFAULT_COLLECTIONS
    chunks_per_collection: int = 6
    p_insert: float = 0.34
    p_update: float = 0.28
    p_replace: float = 0.05
    p_delete: float = 0.1
    p_transaction: float = 0.16
    p_migration: float = 0.04
    multi_shard_fraction: float = 0.5
    large_transaction_fraction: float = 0.25
    max_ops_per_entry: int = 3
    max_transaction_ops: int = 6
    nested_update_fraction: float = 0.25
    max_pending_steps: int = 6
    collmod_at: float | None = 0.1
    noop_interval_secs: int = 10
    idle_shards: tuple[str, ...] = ()
    idle_window: tuple[float, float] = (0.2, 0.8)
    add_shard_at: int | None = None
    max_step_ms: int = 400
    start_time: int = 1_767_225_600  # 2026-01-01T00:00:00Z

    def __post_init__(self) -> None:
        _check_int("seed", self.seed, -(2**63), 2**63 - 1)
        _check_int("shards", self.shards, 1, MAX_SHARDS - 1)
        _check_int("operations", self.operations, 0, 10_000_000)
        _check_int("chunks_per_collection", self.chunks_per_collection, 1, 16)
        _check_int("max_ops_per_entry", self.max_ops_per_entry, 1, 1000)
        _check_int("max_transaction_ops", self.max_transaction_ops, 1, 1000)
        _check_int("max_pending_steps", self.max_pending_steps, 0, 1000)
        _check_int("noop_interval_secs", self.noop_interval_secs, 1, 3600)
        _check_int("max_step_ms", self.max_step_ms, 1, 3_600_000)
        _check_int("start_time", self.start_time, 1, 2**31 - 1)
        if not isinstance(self.database, str) or not self.database:
            raise ConfigurationError(f"expected a non-empty database name, got {self.database!r}")
        if any(c in self.database for c in './ "$\0') or self.database in _RESERVED_DATABASES:
            raise ConfigurationError(f"expected a user database name, got {self.database!r}")
        self._check_collections()
        weights = [getattr(self, name) for name in _STEP_WEIGHTS]
        for name, value in zip(_STEP_WEIGHTS, weights, strict=True):
            _check_fraction(name, value)
        if sum(weights) <= 0:
            raise ConfigurationError(f"expected some step probability above 0, got {weights}")
        for name in ("multi_shard_fraction", "large_transaction_fraction"):
            _check_fraction(name, getattr(self, name))
        _check_fraction("nested_update_fraction", self.nested_update_fraction)
        if self.collmod_at is not None:
            _check_fraction("collmod_at", self.collmod_at)
        self._check_topology()

    def _check_collections(self) -> None:
        specs = self.collections
        if not isinstance(specs, tuple) or not specs:
            raise ConfigurationError(f"expected a non-empty tuple of collections, got {specs!r}")
        if not all(isinstance(spec, CollectionSpec) for spec in specs):
            raise ConfigurationError(f"expected CollectionSpec values, got {specs!r}")
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"expected distinct collection names, got {names}")

    def _check_topology(self) -> None:
        if self.add_shard_at is not None:
            _check_int("add_shard_at", self.add_shard_at, 0, self.operations)
        known = self.all_shard_names
        if not isinstance(self.idle_shards, tuple) or any(s not in known for s in self.idle_shards):
            raise ConfigurationError(
                f"expected idle_shards to be a tuple of names among {known}, got "
                f"{self.idle_shards!r}"
            )
        if all(name in self.idle_shards for name in self.shard_names):
            raise ConfigurationError("expected at least one initial shard that is never idle")
        window = self.idle_window
        if (
            not isinstance(window, tuple)
            or len(window) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in window)
            or not 0 <= window[0] <= window[1] <= 1
        ):
            raise ConfigurationError(
                f"expected idle_window (start, end) with 0 <= start <= end <= 1, got {window!r}"
            )

    @property
    def shard_names(self) -> tuple[str, ...]:
        """The shards present from the start."""
        return tuple(_shard_name(i) for i in range(self.shards))

    @property
    def added_shard(self) -> str | None:
        """The shard added mid-run, if any."""
        return _shard_name(self.shards) if self.add_shard_at is not None else None

    @property
    def all_shard_names(self) -> tuple[str, ...]:
        """Every shard of the run, the added one last."""
        added = self.added_shard
        return self.shard_names + ((added,) if added is not None else ())

    def idle_steps(self) -> range:
        """The steps during which ``idle_shards`` write nothing but periodic no-ops."""
        start, end = self.idle_window
        return range(math.floor(start * self.operations), math.floor(end * self.operations))


_RESERVED_DATABASES: Final = frozenset({"admin", "config", "local"})
_STEP_WEIGHTS: Final = (
    "p_insert",
    "p_update",
    "p_replace",
    "p_delete",
    "p_transaction",
    "p_migration",
)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"expected {name} to be an int in [{low}, {high}], got {value!r}")


def _check_fraction(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ConfigurationError(f"expected {name} to be a number in [0, 1], got {value!r}")
