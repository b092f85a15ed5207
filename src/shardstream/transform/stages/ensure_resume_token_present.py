"""Stage 9: a resumed stream must meet its resume token's event again.

Emulates ``DocumentSourceChangeStreamEnsureResumeTokenPresent``
(document_source_change_stream_ensure_resume_token_present.cpp).  Only streams
resumed from an *event* token get this check.  The first events reaching it must
include the token's own event (swallowed, as are byte-identical copies of it
from other shards); an event past the token before that means the history the
token names is gone, and the stream fails with ChangeStreamFatalError (280).
On mongos this stage runs after the merge; on a single shard, after the shard
pipeline.  It works on any ordered stream of :class:`ChangeEvent`.
"""

from __future__ import annotations

from shardstream.errors import ResumeTokenNotFound
from shardstream.resume_token import ResumeTokenData, encode_token
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.stages.check_resumability import ResumeStatus, compare_with_resume_token


class EnsureResumeTokenPresent:
    """Swallows the resume token's event(s); fails if the stream passes it first."""

    __slots__ = ("_client", "_found", "_token_data")

    def __init__(self, client_token: ResumeTokenData | None) -> None:
        needed = client_token is not None and not client_token.is_high_water_mark
        self._client = client_token if needed else None
        self._token_data = encode_token(client_token).data if client_token is not None else ""
        self._found = not needed

    @property
    def satisfied(self) -> bool:
        """Whether the token's event has been seen (or none was needed)."""
        return self._found

    def __call__(self, event: ChangeEvent) -> ChangeEvent | None:
        """Return the event to deliver, or None when it is the token's own event."""
        client = self._client
        if client is None:
            return event
        status = compare_with_resume_token(event.token_data, client)
        if status is ResumeStatus.FOUND:
            self._found = True
            return None  # the client has it already (every shard's copy alike)
        if status is ResumeStatus.CHECK_NEXT:
            return None
        if status is ResumeStatus.NEEDS_SPLIT:
            # The token names a fragment: the split stage re-splits the event and drops
            # the fragments up to and including that one.
            self._found = True
            return event
        if not self._found:
            raise ResumeTokenNotFound(
                "cannot resume stream; the resume token was not found: expected the event of "
                f"{{_data: {self._token_data!r}}} before any later event, got "
                f"{{_data: {event.token.data!r}}} (server error 280)"
            )
        self._client = None
        return event
