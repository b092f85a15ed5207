"""Reading one stream through the fast path and through the reference path, to compare."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp

from shardstream.merger.change_stream import ChangeStream
from shardstream.resume_token import decode_token_document
from shardstream.transform.field_list import FieldList
from shardstream.transform.raw_event_writer import encode_event_document


def strict(value: Any) -> Any:
    """``value`` with every type spelled out, so == also compares types and field order."""
    if isinstance(value, FieldList):
        return ("FieldList", [(name, strict(item)) for name, item in value.items()])
    if isinstance(value, Mapping):
        return (type(value).__name__, [(name, strict(item)) for name, item in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [strict(item) for item in value])
    return (type(value).__name__, repr(value))


def drain(stream: ChangeStream, until: Timestamp, timeout: float = 20.0) -> list[Any]:
    """Every event, with the stream's resume token after it, until the stream is past ``until``.

    Ends when a try_next finds nothing and the resume token's time is at least ``until``,
    or when the stream ends (an invalidate).
    """
    steps: list[Any] = []
    deadline = time.monotonic() + timeout
    while stream.alive:
        assert time.monotonic() < deadline, f"only {len(steps)} events before the deadline"
        event = stream.try_next()
        token = stream.resume_token
        if event is not None:
            steps.append((event, token))
            continue
        if token is not None and decode_token_document(token).cluster_time >= until:
            break
    return steps


def assert_same_steps(fast: list[Any], reference: list[Any]) -> None:
    """Same events (types, order, BSON bytes) and the same resume token after each."""
    assert len(fast) == len(reference)
    for (event, token), (expected, expected_token) in zip(fast, reference, strict=True):
        assert strict(event) == strict(expected)
        assert encode_event_document(event) == encode_event_document(expected)
        assert token == expected_token
