"""Stage 5: swallow the events a resumed stream has already delivered.

Emulates ``DocumentSourceChangeStreamCheckResumability``
(document_source_change_stream_check_resumability.cpp): each event is compared
field by field with the client's token (clusterTime, tokenType, txnOpIndex,
fromInvalidate, uuid, eventIdentifier by value, fragmentNum).  Older events are
swallowed; the matching one and anything later pass on.  Once an event has passed
the token, the stage lets everything through.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from shardstream.resume_token import ResumeTokenData
from shardstream.resume_token.keystring.codec import append_value
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter
from shardstream.transform.change_event import ChangeEvent


class ResumeStatus(Enum):
    """Where an event stands relative to the client's resume token."""

    CHECK_NEXT = "check next"  # older: swallow it
    FOUND = "found"  # the token's own event
    NEEDS_SPLIT = "needs split"  # the token's event, to be split again into fragments
    SURPASSED = "surpassed"  # newer: the token is behind us


def compare_with_resume_token(event: ResumeTokenData, client: ResumeTokenData) -> ResumeStatus:
    """Compare an event's token data with the client's, as the server does."""
    if event.cluster_time != client.cluster_time:
        return (
            ResumeStatus.SURPASSED
            if event.cluster_time > client.cluster_time
            else (ResumeStatus.CHECK_NEXT)
        )
    if event.token_type != client.token_type:
        return _status(event.token_type > client.token_type)
    if event.txn_op_index != client.txn_op_index:
        return _status(event.txn_op_index > client.txn_op_index)
    if event.from_invalidate != client.from_invalidate:
        return _status(event.from_invalidate)
    if event.uuid != client.uuid:
        # An unset uuid sorts first, as boost::optional compares.
        return _status(client.uuid is None or (event.uuid is not None and event.uuid > client.uuid))
    event_key, client_key = _value_key(event.event_slot), _value_key(client.event_slot)
    if event_key == client_key:
        if client.fragment_num is not None and event.fragment_num is None:
            return ResumeStatus.NEEDS_SPLIT
        if event.fragment_num == client.fragment_num:
            return ResumeStatus.FOUND
        # An unfragmented event sorts before its fragments (no fragmentNum < 0).
        event_fragment = -1 if event.fragment_num is None else event.fragment_num
        client_fragment = -1 if client.fragment_num is None else client.fragment_num
        return _status(event_fragment > client_fragment)
    return _status(event_key > client_key)


def _status(surpassed: bool) -> ResumeStatus:
    return ResumeStatus.SURPASSED if surpassed else ResumeStatus.CHECK_NEXT


def _value_key(value: Any) -> bytes:
    # KeyString bytes order values exactly as the server's Value comparison does.
    if value is None:
        return b""
    out = bytearray()
    append_value(out, TypeBitsWriter(), value)
    return bytes(out)


class CheckResumability:
    """Drops events at or before the client's token until the stream passes it."""

    __slots__ = ("_client", "_passed")

    def __init__(self, client_token: ResumeTokenData | None) -> None:
        self._client = client_token
        self._passed = client_token is None

    def __call__(self, event: ChangeEvent) -> ChangeEvent | None:
        """Return the event if it is at or past the resume point, else None."""
        if self._passed or self._client is None:
            return event
        status = compare_with_resume_token(event.token_data, self._client)
        if status is ResumeStatus.CHECK_NEXT:
            return None
        if status is ResumeStatus.SURPASSED:
            self._passed = True
        return event
