"""Stage 4: an invalidating event is followed by ``invalidate``, then the end.

Emulates ``DocumentSourceChangeStreamCheckInvalidate``
(document_source_change_stream_check_invalidate.cpp).  A collection stream is
invalidated by a drop of the collection, a rename from or into it, or a
dropDatabase; a database stream only by dropDatabase; a cluster stream never.
The invalidate's token is the invalidating event's with ``fromInvalidate`` set,
so it sorts right after it.  A stream started *after* an invalidate swallows the
first invalidate each shard produces, except the one matching its start token.
"""

from __future__ import annotations

from typing import Any

from shardstream.resume_token import ResumeTokenData, encode_token, invalidate_of
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.options import ChangeStreamOptions, StreamScope

_COLLECTION_INVALIDATORS = frozenset({f.DROP, f.RENAME, f.DROP_DATABASE})
_DATABASE_INVALIDATORS = frozenset({f.DROP_DATABASE})


class CheckInvalidate:
    """Adds the invalidate event and marks the stream as ended."""

    __slots__ = ("_invalidators", "_start_after_invalidate", "invalidated")

    def __init__(self, options: ChangeStreamOptions) -> None:
        scope = options.scope
        if scope is StreamScope.COLLECTION:
            self._invalidators: frozenset[str] = _COLLECTION_INVALIDATORS
        elif scope is StreamScope.DATABASE:
            self._invalidators = _DATABASE_INVALIDATORS
        else:
            self._invalidators = frozenset()
        start_after = options.start_after
        self._start_after_invalidate: ResumeTokenData | None = (
            start_after if start_after is not None and start_after.from_invalidate else None
        )
        self.invalidated = False

    def __call__(self, event: ChangeEvent) -> list[ChangeEvent]:
        """Return ``[event]``, or ``[event, invalidate]`` when ``event`` invalidates."""
        if event.operation_type not in self._invalidators:
            self._start_after_invalidate = None
            return [event]
        start_after = self._start_after_invalidate
        self._start_after_invalidate = None
        data = invalidate_of(event.token_data)
        if start_after is not None and data != start_after:
            # Started after an earlier invalidate: this shard's first one is not news.
            return [event]
        token = encode_token(data)
        document: dict[str, Any] = {
            f.ID: token.to_document(),
            f.OPERATION_TYPE: f.INVALIDATE,
            f.CLUSTER_TIME: event.document[f.CLUSTER_TIME],
        }
        if f.WALL_TIME in event.document:
            document[f.WALL_TIME] = event.document[f.WALL_TIME]
        self.invalidated = start_after is None
        return [event, ChangeEvent(document, token, data)]
