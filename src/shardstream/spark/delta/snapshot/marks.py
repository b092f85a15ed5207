"""Sinks: what a snapshot's commit carries, and reading it back from a table.

``ingest --snapshot`` puts the source's documents as of T0 into each table in one Delta
commit, the one that creates the table (:mod:`shardstream.spark.delta.snapshot.tables`).
That commit carries, atomically with the rows:

* two app transactions (``txn`` actions) whose versions are cluster times, packed as a
  BSON Timestamp's 64 bits (seconds high, increment low; a signed long, as Java's
  ``BsonTimestamp.getValue()``): ``shardstream:snapshot:start`` = T0, the majority time
  the documents were read after and the stream starts at, and
  ``shardstream:snapshot:readEnd`` = the majority time after the last document was read;
* commit metadata ``shardstream.watermark`` = the high-water-mark token at T0, so the
  ingest's restart rules (the lower table watermark) start the stream at T0, plus the two
  times as text for people reading the history.

App transactions live in the table's log state, which checkpoints and log clean-up keep,
so a table says whether (and when) it took a snapshot in O(1), however many batches later.
Table properties would be the obvious place, but delta-rs refuses custom properties on
the commit that creates a table.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from bson.timestamp import Timestamp
from deltalake import CommitProperties, DeltaTable, Transaction

from shardstream.errors import SinkError
from shardstream.spark.delta.commits import WATERMARK_KEY, watermark_cluster_time

START_APP: Final = "shardstream:snapshot:start"
READ_END_APP: Final = "shardstream:snapshot:readEnd"
START_KEY: Final = "shardstream.snapshotStart"
READ_END_KEY: Final = "shardstream.snapshotReadEnd"
SNAPSHOT_OPERATION: Final = "read"
"""The ``operationType`` of a change-log row a snapshot wrote (Debezium's ``op: r``)."""

_UINT64: Final = 1 << 64


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotMarks:
    """When a snapshot was read.

    Attributes:
        start: T0: every write at or before it is in the snapshot; the stream starts here.
        read_end: the majority time after the last read: a document may have been read in
            any state between ``start`` and this (so an update before it may find the
            document already deleted).
        token: the high-water-mark token at ``start`` (the rows' ``_id`` and the tables'
            watermark), in the stream's token version.
    """

    start: Timestamp
    read_end: Timestamp
    token: str

    def __post_init__(self) -> None:
        if watermark_cluster_time(self.token) != self.start or self.read_end < self.start:
            raise SinkError(
                f"expected a snapshot token at its start {self.start!r} and a read end at or "
                f"after it, got token {self.token!r:.80} and read end {self.read_end!r}"
            )

    def properties(self) -> CommitProperties:
        """The snapshot commit's markers (see the module docstring)."""
        return CommitProperties(
            app_transactions=[
                Transaction(START_APP, pack_timestamp(self.start)),
                Transaction(READ_END_APP, pack_timestamp(self.read_end)),
            ],
            custom_metadata={
                WATERMARK_KEY: self.token,
                START_KEY: f"{self.start.time},{self.start.inc}",
                READ_END_KEY: f"{self.read_end.time},{self.read_end.inc}",
            },
        )


def snapshot_times(table: DeltaTable | None) -> tuple[Timestamp, Timestamp] | None:
    """(T0, read end) of the snapshot ``table`` took; None when it took none."""
    if table is None:
        return None
    start = table.transaction_version(START_APP)
    read_end = table.transaction_version(READ_END_APP)
    if start is None or read_end is None:
        return None
    return unpack_timestamp(start), unpack_timestamp(read_end)


def pack_timestamp(time: Timestamp) -> int:
    """A Timestamp as a signed 64-bit number (seconds in the high half).

    >>> pack_timestamp(Timestamp(1700000000, 7))
    7301444403200000007
    """
    packed = (time.time << 32) | time.inc
    return packed - _UINT64 if packed >= _UINT64 >> 1 else packed


def unpack_timestamp(packed: int) -> Timestamp:
    """The Timestamp :func:`pack_timestamp` packed.

    >>> unpack_timestamp(pack_timestamp(Timestamp(4000000000, 1)))
    Timestamp(4000000000, 1)
    """
    value = packed % _UINT64
    return Timestamp(value >> 32, value & 0xFFFFFFFF)
