"""The two safety checks of a live tailer, apart from its thread plumbing.

* How far an idle shard may promise: its majority commit point, read from the member
  that serves the cursor, before a read that came back empty.
* Whether the oplog still reaches the point a tailer reads from (lost history).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.collection import Collection
from pymongo.errors import PyMongoError

from shardstream.errors import ChangeStreamHistoryLost

# (the shard's majority commit point, the "host:port" of the member that reported it)
Majority = tuple[Timestamp, str]


def read_majority(
    client: MongoClient[Any], oplog: Collection[Any], on_error: Callable[[PyMongoError], None]
) -> Majority | None:
    """The shard's majority commit point and the member that reported it, if known.

    ``hello`` goes to a member chosen by the oplog collection's read preference, the
    same rule that picks the cursor's member.
    """
    try:
        hello = client.admin.command("hello", read_preference=oplog.read_preference)
    except PyMongoError as exc:
        on_error(exc)
        return None  # the cursor's own reads will surface a lasting failure
    optime = (hello.get("lastWrite") or {}).get("majorityOpTime") or {}
    ts, me = optime.get("ts"), hello.get("me")
    if isinstance(ts, Timestamp) and isinstance(me, str):
        return ts, me.lower()
    return None


def idle_promise(
    majority: Majority | None,
    cursor_address: tuple[str, int | None] | None,
    last_ts: Timestamp | None,
) -> Timestamp | None:
    """What a shard may promise after an empty read: ``majority``, when that is safe.

    Why this is safe: ``majority`` was read *before* the getMore that came back empty,
    from the very member serving the cursor. Majority-committed ``ts`` values are final
    (they cannot roll back, and a primary only assigns larger ones), and the oplog at or
    below the majority point has no holes visible to a majority read: a member advances
    its commit point only past entries that are written with no gaps below them. So the
    empty majority read, taken at a snapshot at or after ``majority``, saw every entry at
    or below it, and all of them were already queued. Never promise beyond it: entries
    above it may still be in flight, or appear later through an oplog hole. On a
    secondary the same holds for that secondary's own commit point, which is why the
    member must be the cursor's: another member's point says nothing about these reads.

    Returns:
        The promise, or None when nothing new may be promised.
    """
    if majority is None or cursor_address is None:
        return None
    ts, me = majority
    host, port = cursor_address
    if me != f"{host}:{port}".lower():
        return None
    if last_ts is not None and ts <= last_ts:
        return None
    return ts


def check_history(
    oplog_local: Collection[Any],
    bound: Timestamp,
    *,
    resuming: bool,
    start: Timestamp,
    where: str,
) -> None:
    """Fail unless the oplog still reaches ``bound`` now that the cursor is positioned.

    Checked after the find's first batch: truncation only removes the oldest entries,
    so if an entry at or below ``bound`` exists now, it existed when the find chose its
    first entry, and nothing between ``bound`` and that entry was skipped.

    Args:
        oplog_local: the oplog at read concern local (the oldest entry may not be
            majority-committed yet on a lagging member, but it exists).
        bound: the ts the tailer reads from (its start, or its last entry).
        resuming: the tailer already delivered entries (an empty oplog is then a loss).
        start: the stream's start, for the message.
        where: names the shard in the message.

    Raises:
        ChangeStreamHistoryLost: the oplog's first entry is now above ``bound``.
    """
    oldest = oplog_local.find_one({}, {"ts": 1}, sort=[("$natural", 1)])
    first = None if oldest is None else oldest.get("ts")
    if first is None and not resuming:
        return  # an empty oplog has lost nothing (a real oplog is never empty)
    if first is None or first > bound:
        raise ChangeStreamHistoryLost(
            f"{where}: the oplog no longer reaches {bound!r} (start {start!r}); "
            f"its first entry is now {first!r}"
        )
