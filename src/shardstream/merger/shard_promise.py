"""What a shard cursor promises the merge after each batch (its PBRT).

As on the server (``_performChangeStreamsAccounting``), a shard's postBatchResumeToken
is the last event's token, or a high-water-mark token at the last examined oplog
timestamp when the scan has moved past that event; filtered entries (noops, other
collections) move it too.  Both shard readers -- the reference one over decoded entries
and the fast one over raw bytes -- keep their promise here, so they cannot drift apart.
"""

from __future__ import annotations

from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost, MergeError
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeToken, decode_token, encode_token, high_water_mark
from shardstream.transform import ChangeStreamOptions


class ShardPromise:
    """One shard's promise to the merge, and the checks on what its source promised.

    Args:
        name: the shard's name, for errors.
        options: the stream's options (its start point seeds the promise).
        start: the stream's start time; the shard's oplog must reach back to it.
        history_checked: the source checks that itself (a live tailer does, on every
            open); otherwise the first entry read is checked here (a file source hands out
            its whole file, so its first entry is the oldest).
    """

    def __init__(
        self,
        name: str,
        options: ChangeStreamOptions,
        start: Timestamp | None,
        *,
        history_checked: bool,
    ) -> None:
        self._name = name
        self._version = options.default_token_version
        self._start = start
        self._history_checked = start is None or history_checked
        self._last_event: ResumeToken | None = None
        self.token: ResumeToken | None = _initial_promise(options)
        self.source_promise: Timestamp | None = None
        # The last token's position: the sync looks at every shard's every 10 ms while
        # nothing is ready, and decoding four tokens each time was most of a look's CPU.
        self._positioned: tuple[ResumeToken | None, Timestamp | None] = (None, None)

    @classmethod
    def for_source(
        cls, source: OplogSource, options: ChangeStreamOptions, start: Timestamp | None
    ) -> ShardPromise:
        """The promise of a reader of ``source`` (which may check its history itself)."""
        return cls(
            source.name,
            options,
            start,
            history_checked=getattr(source, "verifies_history", False),
        )

    @property
    def position(self) -> Timestamp | None:
        """The cluster time of the promise (None before the shard's first batch)."""
        token = self.token
        if token is None:
            return None
        known, position = self._positioned
        if token is not known:
            position = decode_token(token).cluster_time
            self._positioned = (token, position)
        return position

    def check_source_promise(self, promise: Timestamp | None) -> None:
        """The source's own promise (a timestamp) never goes back.

        Raises:
            MergeError: it went backwards.
        """
        if promise is None:
            return
        if self.source_promise is not None and promise < self.source_promise:
            raise MergeError(
                f"shard {self._name!r}: its promise went backwards, from "
                f"{self.source_promise!r} to {promise!r}"
            )
        self.source_promise = promise

    def check_first_entry(self, first_ts: object) -> None:
        """The shard's first entry read must not be after the stream's start (once).

        Raises:
            ChangeStreamHistoryLost: it is.
        """
        if not self._history_checked:
            self._history_checked = True
            check_history(self._name, first_ts, self._start)

    def advance(
        self, last: ResumeToken | None, source_promise: Timestamp | None, closed: bool
    ) -> ResumeToken | None:
        """The promise after a batch whose last event's token is ``last`` (None: no
        event), read up to ``source_promise``."""
        if last is not None:
            self._last_event = last
        candidates = [token for token in (self._last_event, self.token) if token is not None]
        if source_promise is not None and not closed:
            candidates.append(encode_token(high_water_mark(source_promise, self._version)))
        if candidates:
            self.token = max(candidates, key=lambda token: token.data)
        return self.token


class PromisingReader:
    """What both shard readers share: the source, and the promise kept for it."""

    _promise: ShardPromise

    def __init__(self, source: OplogSource) -> None:
        self.source = source

    @property
    def name(self) -> str:
        """The shard's name."""
        return self.source.name

    @property
    def position(self) -> Timestamp | None:
        """The cluster time of the shard's promise (None before its first batch)."""
        return self._promise.position


def check_history(name: str, first_ts: object, start: Timestamp | None) -> None:
    """A shard's oplog (first entry at ``first_ts``) must reach back to the stream's start.

    Raises:
        ChangeStreamHistoryLost: it starts after ``start``.
    """
    if isinstance(first_ts, Timestamp) and start is not None and first_ts > start:
        raise ChangeStreamHistoryLost(
            f"Resume of change stream was not possible, as the resume point may no longer be "
            f"in the oplog: shard {name!r} starts at {first_ts!r}, after the stream's "
            f"start {start!r} (server error 286)"
        )


def _initial_promise(options: ChangeStreamOptions) -> ResumeToken | None:
    """The promise before any entry is read: the stream's start point, as on a shard.

    The server seeds a shard cursor's postBatchResumeToken with the start token.  An
    event token's own event comes back up once more (EnsureResumeTokenPresent swallows
    it), so for one the promise is the high-water mark at its time, which sorts below it.
    """
    token = options.resume_token
    if token is not None:
        if token.is_high_water_mark:
            return encode_token(token)
        return encode_token(high_water_mark(token.cluster_time, options.default_token_version))
    if options.start_at_operation_time is not None:
        return encode_token(
            high_water_mark(options.start_at_operation_time, options.default_token_version)
        )
    return None
