"""Sync: a write the target refused, addressed again by the target's own shard key or met
by the conflict policy.

A refusal for the shard key (61: no shard key in an upsert's query; 31025: an update that
changes the key's value by a query without it) makes the writes of that collection
addressed by the target's keys from then on (:mod:`.target_shard_key`), and the refused
write goes again.  A duplicate key (11000) is a conflict: ``--on-conflict fail`` stops the
sync naming the key and the event's token; ``skip`` and ``overwrite`` record the write and
the document it met (:mod:`.conflict_log`) before the applier drops the write or deletes
that document and writes again.  Any other refusal stops the sync.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

from pymongo.collection import Collection
from pymongo.errors import BulkWriteError

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.conflict_log import ConflictLog, write_description
from shardstream.cluster_sync.namespace_map import Namespace
from shardstream.cluster_sync.target_retry import retrying
from shardstream.cluster_sync.target_shard_key import (
    KEY_UPDATE_WITHOUT_KEY,
    SHARD_KEY_NOT_FOUND,
    TargetShardKeys,
    current_key_values,
)
from shardstream.cluster_sync.write_statements import UPDATE
from shardstream.errors import ShardstreamError

DUPLICATE_KEY: Final = 11000
_T = TypeVar("_T")


class SyncConflict(ShardstreamError):
    """The target refused a write: a duplicate key (``--on-conflict`` says what to do), or
    one it cannot take whatever the policy (named in the message)."""


class RefusedWrites:
    """The applier's answers to refused writes (shared by its lanes)."""

    def __init__(
        self,
        shard_keys: TargetShardKeys,
        conflict_log: ConflictLog,
        on_conflict: str,
        collection: Callable[[Namespace], Collection[Any]],
        retry_for_s: float,
    ) -> None:
        """Args: the target's shard keys, where conflicts are recorded, the policy, the
        applier's collection of a namespace, and how long a lost connection is retried."""
        self._shard_keys = shard_keys
        self.conflict_log = conflict_log
        self._on_conflict = on_conflict
        self._collection = collection
        self._retry_for_s = retry_for_s

    def readdressed(
        self,
        target: Namespace,
        fields: tuple[str, ...],
        write: CrudWrite,
        exc: BulkWriteError,
        *,
        pin: bool = True,
    ) -> bool:
        """Whether ``write``, refused for the target's shard key, can go again better
        addressed: by keys now other than ``fields``, or (``pin``) by its current values."""
        code = exc.details["writeErrors"][0].get("code")
        if code not in (SHARD_KEY_NOT_FOUND, KEY_UPDATE_WITHOUT_KEY):
            return False
        if not self._shard_keys.strict:
            self._retrying(self._shard_keys.tighten)
        elif code == SHARD_KEY_NOT_FOUND:
            self._retrying(self._shard_keys.refresh)
        now = self._shard_keys.fields(target)
        if code == SHARD_KEY_NOT_FOUND or now != fields or not pin:
            return now != fields
        if write.kind != UPDATE or not now:
            return False
        collection = self._collection(target)
        values = self._retrying(partial(current_key_values, collection, write, now))
        return values is not None and self._shard_keys.pin(target, write, values)

    def conflict(self, target: Namespace, write: CrudWrite, exc: BulkWriteError) -> dict[str, Any]:
        """The key of the document ``write`` met, its conflict recorded (the policy is
        ``skip`` or ``overwrite``: the caller drops the write, or deletes that document).

        Raises:
            SyncConflict: the policy is ``fail``, or the refusal is not a duplicate key.
        """
        error = exc.details["writeErrors"][0]
        key = dict(error.get("keyValue") or {})
        where = f"{target[0]}.{target[1]}"
        token = dict(write.token)
        if error.get("code") in (SHARD_KEY_NOT_FOUND, KEY_UPDATE_WITHOUT_KEY):
            fields = self._shard_keys.fields(target)
            addressed = (
                f"although it was addressed by the key fields its config.collections lists, "
                f"{fields!r}"
                if fields
                else "and its config.collections names no shard key for it (or may not be "
                "read by this user)"
            )
            raise SyncConflict(
                f"the target refused a write to {where} for its shard key (error "
                f"{error.get('code')}: {error.get('errmsg')}) {addressed} (event token "
                f"{token!r})"
            ) from exc
        if error.get("code") != DUPLICATE_KEY or self._on_conflict == "fail" or not key:
            raise SyncConflict(
                f"the target refused a write to {where}: error "
                f"{error.get('code')} on key {key or error.get('errmsg')!r} "
                f"(event token {token!r}); pass --on-conflict overwrite or skip to go on"
            ) from exc
        # Recorded before the policy acts: under overwrite, ``met`` is what gets replaced.
        met = self._retrying(partial(self._collection(target).find_one, key))
        described = write_description(write)
        self.conflict_log.record(target, key, token=token, write=described, met=met)
        return key

    def _retrying(self, call: Callable[[], _T]) -> _T:
        return retrying(call, self._retry_for_s)


def refused_index(exc: BulkWriteError) -> int:
    """The index of the write ``exc`` refused; a write concern error (no refused write) is
    raised again as it is: nothing here can settle it."""
    errors = exc.details.get("writeErrors") or []
    if not errors:
        raise exc
    return int(errors[0]["index"])
