"""Facade: :class:`ChangeStream`, the iterator :func:`shardstream.watch` returns, shaped like
pymongo's: iteration, ``try_next``, ``resume_token``, ``alive``, ``close`` and ``with``
behave as the driver's do, including the change-stream spec's resume-token caching rules;
``try_next_raw``, ``try_next_decoded`` and ``take_decoded`` hand fast-path events to readers
that want their bytes (``replay``'s writers, the sync's planner).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, TypeVar

from bson.timestamp import Timestamp

from shardstream.merger.floored_stream import FlooredStream
from shardstream.merger.merged_stream import MergedStream
from shardstream.merger.raw.encoded_event import EncodedEvent, decode_event, leading_id
from shardstream.resume_token import ResumeToken
from shardstream.transform import ChangeEvent
from shardstream.transform.raw.event_writer import encode_event_document

_POLL_INTERVAL_S: Final = 0.01
_T = TypeVar("_T")


class ChangeStream:
    """An iterator over merged change events (like ``pymongo.change_stream.ChangeStream``).

    Use :func:`watch` to create one.
    """

    def __init__(
        self,
        merged: MergedStream | FlooredStream,
        *,
        batch_size: int,
        max_await_time_ms: int | None,
        start_token: Mapping[str, Any] | None = None,
    ) -> None:
        self._merged = merged
        self._batch_size = batch_size
        self._max_await_s = None if max_await_time_ms is None else max_await_time_ms / 1000
        self._batch: deque[ChangeEvent] = deque()
        self._batch_resume_token: ResumeToken | None = None
        # The driver spec caches startAfter (else resumeAfter) as given when the stream
        # starts, so resume_token is usable before the first batch arrives.
        self._resume_token: dict[str, Any] | None = (
            None if start_token is None else copy.deepcopy(dict(start_token))
        )
        self._closed = False

    def __iter__(self) -> ChangeStream:
        return self

    def __next__(self) -> dict[str, Any]:
        return self.next()

    def next(self) -> dict[str, Any]:
        """Return the next event, waiting for one; StopIteration once the stream has ended.

        A stream over finite sources (files) ends when they are all read; over live
        sources it waits (polling at most ``max_await_time_ms`` per call to the shards).
        """
        while self.alive:
            event = self.try_next()
            if event is not None:
                return event
            if not self._batch and not self._merged.exhausted:
                time.sleep(_POLL_INTERVAL_S)
        raise StopIteration

    def try_next(self, *, wait: bool = True) -> dict[str, Any] | None:
        """Return the next event if one is ready now, else None (and advance ``resume_token``).

        ``wait=False``: never wait ``max_await_time_ms`` for live shards (one look at what
        the merge holds), for a caller that paces its own reads.
        """
        return self.try_next_decoded(decode_event, wait=wait)

    def try_next_decoded(
        self, decode: Callable[[bytes], dict[str, Any]], *, wait: bool = True
    ) -> dict[str, Any] | None:
        """:meth:`try_next`, a fast-path event decoded from its bytes by ``decode`` (for
        :meth:`try_next`, :func:`~shardstream.merger.raw.encoded_event.decode_event`; the
        sync keeps some fields as bytes: ``cluster_sync.sync_event``).

        ``decode`` must give the event's ``_id``. A fast-path event's copied values only
        meet a decoder here: what it raises (a corrupt value) closes the stream, as a
        reference-path error does. A reference-path event comes as its dict (encoding it to
        decode it again would only cost).
        """
        event = self._pop_event(wait)
        if event is None:
            return None
        document = self._decoded(event, decode)
        self._advance(document["_id"])
        return document

    def take_decoded(
        self,
        decode: Callable[[bytes], _T],
        max_events: int,
        document: Callable[[dict[str, Any]], _T],
    ) -> list[_T]:
        """Up to ``max_events`` events ready now (never waiting), a fast-path event as
        ``decode`` makes it from its bytes, a reference-path event as ``document`` makes it
        from its dict, and ``resume_token`` where that many :meth:`try_next` calls would
        leave it: for a reader that takes what is ready in one call instead of one call per
        event (the sync turns each event into its target write here).

        What ``decode`` or ``document`` raises closes the stream and propagates (the events
        taken before it are not returned).
        """
        taken: list[_T] = []
        ready = self._batch
        last: ChangeEvent | None = None
        while len(taken) < max_events:
            if ready:
                event = ready.popleft()
            else:
                if last is not None:  # the token after the held batch's last event
                    self._advance(_token_of(last))
                fetched = self._pop_event(wait=False)
                if fetched is None:
                    return taken
                event = fetched
            try:
                converted = (
                    decode(event.raw)
                    if isinstance(event, EncodedEvent)
                    else document(event.document)
                )
            except BaseException:
                self.close()
                raise
            taken.append(converted)
            last = event
        if last is not None:
            self._advance(_token_of(last))
        return taken

    def _decoded(
        self, event: ChangeEvent, decode: Callable[[bytes], dict[str, Any]]
    ) -> dict[str, Any]:
        try:
            return decode(event.raw) if isinstance(event, EncodedEvent) else event.document
        except BaseException:
            self.close()
            raise

    def try_next_raw(self) -> bytes | None:
        """:meth:`try_next`, with the event as the BSON bytes the server would send.

        On the fast path these are the bytes it wrote, never decoded (a corrupt value is
        found by whoever reads them); a reference-path event is encoded. ``resume_token``
        advances as with :meth:`try_next`.
        """
        event = self._pop_event()
        if event is None:
            return None
        self._advance(_token_of(event))
        if isinstance(event, EncodedEvent):
            return event.raw
        return encode_event_document(event.document)

    def _pop_event(self, wait: bool = True) -> ChangeEvent | None:
        if self._closed:
            return None
        if not self._batch:
            try:
                self._fetch_batch(wait)
            except BaseException:
                # As pymongo: a fatal error closes the stream (nothing here is resumable;
                # the caller resumes from resume_token with a new watch()).
                self.close()
                raise
            if not self._batch:
                return None
        return self._batch.popleft()

    def _advance(self, event_id: Mapping[str, Any]) -> None:
        if not self._batch and self._batch_resume_token is not None:
            self._resume_token = self._batch_resume_token.to_document()
        else:
            self._resume_token = dict(event_id)

    def _fetch_batch(self, wait: bool) -> None:
        await_s = self._max_await_s if wait else None
        deadline = None if await_s is None else time.monotonic() + await_s
        while True:
            events, resume_token = self._merged.next_batch(self._batch_size)
            self._batch.extend(events)
            self._batch_resume_token = resume_token
            if events or self._merged.exhausted or deadline is None or time.monotonic() >= deadline:
                break
            time.sleep(_POLL_INTERVAL_S)
        if not self._batch and resume_token is not None:
            self._resume_token = resume_token.to_document()

    @property
    def resume_token(self) -> dict[str, Any] | None:
        """Where to resume: the last event's ``_id``, or the batch's postBatchResumeToken."""
        return None if self._resume_token is None else dict(self._resume_token)

    @property
    def alive(self) -> bool:
        """False once closed, invalidated, or (finite sources) fully read."""
        return not self._closed and (bool(self._batch) or not self._merged.exhausted)

    def shard_positions(self) -> dict[str, Timestamp | None]:
        """How far each shard is known to be (its promise's cluster time)."""
        return self._merged.shard_positions()

    def close(self) -> None:
        """Stop reading and release the sources."""
        if not self._closed:
            self._closed = True
            self._merged.close()

    def __enter__(self) -> ChangeStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _token_of(event: ChangeEvent) -> Mapping[str, Any]:
    """An event's resume token, read from its bytes where the fast path wrote it first."""
    token: Mapping[str, Any] | None = None
    if isinstance(event, EncodedEvent):
        token = leading_id(event.raw)
    return token or event.document["_id"]
