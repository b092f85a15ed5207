"""A merged stream restarted after one of its own tokens on the fast path: a start at the
token's cluster time, without the events at or below the token.

The fast path refuses resume tokens (``fast_path_applies``): resuming compares each event
with the token on the shards (``CheckResumability``), which needs decoded events.  A reader
that only ever restarts after a token of its own stream, with the same options (the Spark
source after a batch's watermark, the sync after its checkpoint), reads the same events by
starting the shards at the token's time, which the fast path takes, and dropping here every
event whose token ``_data`` sorts at or below it: tokens sort in stream order, and a
high-water-mark token sorts below every event of its time.  Two events of different shards
never share a token (a document lives on one shard; a transaction's events differ by
``txnOpIndex`` or document), so nothing the stream had not delivered is dropped.

What the resumed reference path does and this does not: fail when the token's own event is
no longer in the oplog (``ResumeTokenNotFound``). A token the stream itself returned while
reading at majority is never rolled back; an oplog rolled over past its time still fails, at
the shards' start (``ChangeStreamHistoryLost``).
"""

from __future__ import annotations

from bson.timestamp import Timestamp

from shardstream.merger.merged_stream import MergedStream
from shardstream.resume_token import ResumeToken, ResumeTokenData
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from shardstream.transform.raw.pipeline import fast_path_applies


class FlooredStream:
    """A merged stream without its events at or below ``floor``.

    Args:
        stream: the merged stream, started at the floor token's cluster time.
        floor: the token ``_data`` to read after ("" = nothing is dropped).
    """

    def __init__(self, stream: MergedStream, floor: str) -> None:
        self._stream = stream
        self._floor = floor

    @property
    def exhausted(self) -> bool:
        """Whether the stream has ended."""
        return self._stream.exhausted

    @property
    def invalidated(self) -> bool:
        """Whether the stream has returned an invalidate."""
        return self._stream.invalidated

    def next_batch(self, max_events: int) -> tuple[list[ChangeEvent], ResumeToken | None]:
        """The stream's next batch above the floor; its postBatchResumeToken once above it."""
        events, resume_token = self._stream.next_batch(max_events)
        floor = self._floor
        if floor:
            events = [event for event in events if event.token.data > floor]
            if resume_token is not None and resume_token.data <= floor:
                resume_token = None
            if events or resume_token is not None:
                self._floor = ""  # past it: every later event and token sorts above it
        return events, resume_token

    def shard_positions(self) -> dict[str, Timestamp | None]:
        """How far each shard is known to be (as :meth:`MergedStream.shard_positions`)."""
        return self._stream.shard_positions()

    def close(self) -> None:
        """Close the stream's sources."""
        self._stream.close()


def started_at_token(
    options: ChangeStreamOptions, token: ResumeTokenData
) -> ChangeStreamOptions | None:
    """``options`` started at ``token``'s cluster time instead of their own start, for a
    stream that drops the events up to ``token`` itself; None where that is not the same
    stream: an invalidate's or a fragment's token (the reference path's ``startAfter`` and
    split events), or a token of another version than the stream writes (tokens of two
    versions do not sort together)."""
    if (
        token.from_invalidate
        or token.fragment_num is not None
        or token.version != options.default_token_version
    ):
        return None
    return options.with_options(
        resume_after=None, start_after=None, start_at_operation_time=token.cluster_time
    )


def resumed_on_fast_path(options: ChangeStreamOptions) -> ChangeStreamOptions | None:
    """``options`` resuming after their ``resume_after`` as a start at its time
    (:func:`started_at_token`), or None where the fast path cannot take them: no
    ``resume_after``, a token :func:`started_at_token` refuses, or options the fast path
    refuses anyway."""
    token = options.resume_after
    started = None if token is None else started_at_token(options, token)
    return started if started is not None and fast_path_applies(started) else None
