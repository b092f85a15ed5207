"""The order rule of one oplog: every entry has a Timestamp ``ts``, strictly increasing.

A replica set's oplog is ordered by ``ts`` and each ``ts`` names one entry: the server
keys ``local.oplog.rs`` records by it (``record_id_helpers::keyForOptime``), so two
entries cannot share a ``ts`` and a scan returns them in increasing order.  A file that
breaks the rule was not read from one oplog (or was edited), and replaying it would
hand out tokens out of order or twice; so it is refused, on every path, with the same
message: the one a shard of a merge has always given (``FileOplogSource``).

A ts is also within the server's clock: its seconds and increment at most 2**31 - 1
(``LogicalClock::kMaxSignedInt``; the clock refuses to advance past it), so no oplog holds
a later one.  The rule keeps every path's windows representable: a cluster-time window
ends one increment past its last entry, which the largest Timestamp would not allow.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from typing import Any, Final

from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog.corrupt_entry import entry_ts

MAX_CLOCK_PART: Final = 2**31 - 1
"""The largest seconds, and the largest increment, of a cluster time the server hands out."""
OUT_OF_CLOCK_BITS: Final = (1 << 63) | (1 << 31)
"""The bits of a ts key (``time << 32 | inc``) set only when it is beyond the clock."""


def entry_timestamp(entry: Mapping[str, Any], where: str, last: Timestamp | None) -> Timestamp:
    """``entry``'s ts, checked to be a Timestamp after ``last``.

    Args:
        where: names the oplog in the message, e.g. ``shard 'a' (a.bson)``.
        last: the ts of the entry before (None: this is the first).

    Raises:
        OplogError: ts missing or not a Timestamp, not above ``last``, or beyond the
            server's clock.
    """
    # A raw entry's ts from its bytes: inflating its top level would raise pymongo's error
    # for damage elsewhere in it (the pipeline's decode reports that, naming the entry).
    ts = entry_ts(bytes(entry.raw)) if isinstance(entry, RawBSONDocument) else entry.get("ts")
    if not isinstance(ts, Timestamp):
        raise missing_ts_error(where, ts, last)
    if last is not None and ts <= last:
        raise ts_order_error(where, ts, last)
    if ts.time > MAX_CLOCK_PART or ts.inc > MAX_CLOCK_PART:
        raise clock_limit_error(where, ts)
    return ts


def clock_limit_error(where: str, ts: object) -> OplogError:
    """The error for an entry at ``ts``, beyond the server's clock (see the module)."""
    return OplogError(
        f"{where}: expected ts seconds and increment at most {MAX_CLOCK_PART} (the "
        f"server's clock never goes past them), got {ts!r}"
    )


def missing_ts_error(where: str, ts: object, last: object = None) -> OplogError:
    """The error for an entry whose ts is ``ts`` (not a Timestamp), after one at ``last``."""
    after = f" after ts {last!r}" if last is not None else ""
    return OplogError(
        f"{where}: expected every entry to have a Timestamp ts, got {ts!r:.60}{after}"
    )


def ts_order_error(where: str, ts: object, last: object) -> OplogError:
    """The error for an entry at ``ts`` that follows one at ``last`` (not below it)."""
    return OplogError(f"{where}: expected ts to increase, got {ts!r} after {last!r}")


def in_ts_order(
    entries: Iterable[Mapping[str, Any]], where: str
) -> Generator[Mapping[str, Any], None, None]:
    """Yield ``entries``, refusing the first that breaks the order rule (see the module).

    Closing the returned generator closes ``entries`` too (a file reader's file).
    """
    last: Timestamp | None = None
    try:
        for entry in entries:
            last = entry_timestamp(entry, where, last)
            yield entry
    finally:
        close = getattr(entries, "close", None)
        if close is not None:
            close()
