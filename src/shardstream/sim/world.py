"""Simulator: the mutable state of a run, from shard clocks and oplogs to open work.

Holds the shards (each with its clock, oplog and periodic no-op writer), the
simulated wall clock, sessions, work left open for a later step, and tallies.

Everything random goes through one ``random.Random(seed)`` and every collection the
run iterates is ordered, so a run is reproducible byte for byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import uuid
from collections.abc import Mapping
from typing import Any, Final, Protocol

from bson.binary import Binary
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.sim import entries
from shardstream.sim.clock import HybridClock
from shardstream.sim.collection import CollectionState
from shardstream.sim.config import SimulationConfig
from shardstream.sim.result import MigrationRecord

# lsid.uid identifies the user; plain bytes are BinData subtype 0, as bson decodes it back.
_USER_DIGEST: Final = hashlib.sha256(b"app@shop").digest()
_MAX_SESSIONS: Final = 16


class Shard:
    """One shard's primary: its clock, its oplog, and its periodic no-op writer.

    Args:
        name: the shard's name.
        start: its clock starts just after this timestamp.
        first_noop_ms: the no-op writer's first tick (simulated wall milliseconds).
    """

    __slots__ = ("clock", "collections", "name", "next_noop_ms", "noop_mark", "oplog")

    def __init__(self, name: str, start: Timestamp, first_noop_ms: int) -> None:
        self.name = name
        self.clock = HybridClock(start)
        self.oplog: list[dict[str, Any]] = []
        self.collections: dict[str, None] = {}  # names created here, in order
        self.next_noop_ms = first_noop_ms
        self.noop_mark: Timestamp | None = None

    @property
    def last_written(self) -> Timestamp | None:
        """The ``ts`` of the newest entry, if any."""
        if not self.oplog:
            return None
        ts: Timestamp = self.oplog[-1]["ts"]
        return ts

    def write(
        self, body: Mapping[str, Any], wall_ms: int, prev: Timestamp | None = None
    ) -> Timestamp:
        """Append ``body`` at the next timestamp of wall time ``wall_ms``; return that ``ts``."""
        ts = self.clock.tick(wall_ms // 1000)
        self.oplog.append(entries.stamp(body, ts, prev))
        return ts

    def write_at(self, body: Mapping[str, Any], ts: Timestamp, prev: Timestamp | None) -> None:
        """Append ``body`` at exactly ``ts`` (an agreed commit timestamp)."""
        self.clock.take(ts)
        self.oplog.append(entries.stamp(body, ts, prev))

    def run_noop_writer(self, until_ms: int, interval_ms: int) -> int:
        """Run the no-op writer's ticks up to ``until_ms``; return how many no-ops it wrote.

        Like ``NoopWriter``: at each tick, write a no-op only if the last written
        optime has not changed since the previous tick, then remember it.  An idle
        shard therefore writes one every interval, a busy one none.
        """
        written = 0
        while self.next_noop_ms <= until_ms:
            if self.last_written == self.noop_mark:
                self.write(entries.noop("periodic noop"), self.next_noop_ms)
                written += 1
            self.noop_mark = self.last_written
            self.next_noop_ms += interval_ms
        return written


@dataclasses.dataclass(eq=False, slots=True)
class Session:
    """A logical session running transactions one at a time."""

    lsid: dict[str, Any]
    txn_number: int = -1
    busy: bool = False

    def begin(self) -> dict[str, Any]:
        """Start its next transaction; return the ``lsid`` / ``txnNumber`` entry fields."""
        self.txn_number += 1
        self.busy = True
        return {"lsid": self.lsid, "txnNumber": Int64(self.txn_number)}


class Pending(Protocol):
    """Open work finished at a later step (a prepared transaction, a migration, a cleanup)."""

    @property
    def due_step(self) -> int:
        """The step at which it is finished."""

    @property
    def shards(self) -> tuple[str, ...]:
        """The shards it writes to."""

    def finish(self, world: World) -> None:
        """Write its remaining entries and apply its effects."""


@dataclasses.dataclass(slots=True)
class Tally:
    """Running counts of what the run did."""

    crud_writes: int = 0
    transactions: int = 0
    multi_shard_transactions: int = 0
    large_transactions: int = 0
    migrations: int = 0
    migrated_documents: int = 0
    periodic_noops: int = 0
    collmods: int = 0


class World:
    """The whole simulated cluster at one moment."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.wall_ms = config.start_time * 1000
        self.step = -1
        self.shards: dict[str, Shard] = {}
        self.collections: list[CollectionState] = []
        self.locked: set[tuple[str, bytes]] = set()  # documents in open prepared transactions
        self.sessions: list[Session] = []
        self.pending: list[Pending] = []
        self.tally = Tally()
        self.migration_log: list[MigrationRecord] = []
        self.shard_added: dict[str, Timestamp] = {}
        self._idle = config.idle_steps()

    @property
    def wall_secs(self) -> int:
        """The simulated wall clock, in whole seconds."""
        return self.wall_ms // 1000

    def new_uuid(self) -> uuid.UUID:
        """A random (version 4) UUID from the run's randomness."""
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def add_shard(self, name: str, start: Timestamp) -> Shard:
        """Bring up shard ``name`` whose clock starts after ``start``."""
        interval = self.config.noop_interval_secs * 1000
        shard = Shard(name, start, self.wall_ms + self.rng.randrange(1, interval + 1))
        self.shards[name] = shard
        self.shard_added[name] = start
        return shard

    def advance(self, ms: int) -> None:
        """Let ``ms`` of wall time pass; each shard's no-op writer runs meanwhile."""
        self.wall_ms += ms
        interval = self.config.noop_interval_secs * 1000
        for shard in self.shards.values():
            self.tally.periodic_noops += shard.run_noop_writer(self.wall_ms, interval)

    def is_idle(self, shard: str) -> bool:
        """Whether ``shard`` is in an idle stretch now (it then takes no new work)."""
        return shard in self.config.idle_shards and self.step in self._idle

    def writable_shards(self) -> list[str]:
        """The shards that may take new writes now, in name order."""
        return [name for name in self.shards if not self.is_idle(name)]

    def write(
        self, shard: str, body: Mapping[str, Any], prev: Timestamp | None = None
    ) -> Timestamp:
        """Write ``body`` on ``shard`` now; return its ``ts``."""
        return self.shards[shard].write(body, self.wall_ms, prev)

    def message(self, sender: str, receiver: str) -> None:
        """``sender`` talks to ``receiver``: the receiver's clock catches up (HLC rule)."""
        self.shards[receiver].clock.observe(self.shards[sender].clock.last)

    def session(self) -> Session:
        """A session with no transaction open (a new one if all are busy)."""
        idle = [session for session in self.sessions if not session.busy]
        if idle and (len(self.sessions) >= _MAX_SESSIONS or self.rng.random() < 0.8):
            return self.rng.choice(idle)
        lsid = {"id": Binary(self.new_uuid().bytes, 4), "uid": _USER_DIGEST}
        self.sessions.append(Session(lsid))
        return self.sessions[-1]

    def collection(self, name: str) -> CollectionState:
        """The collection named ``name``."""
        for coll in self.collections:
            if coll.name == name:
                return coll
        raise KeyError(name)
