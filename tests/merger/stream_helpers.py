"""Reading a live ChangeStream in tests: poll try_next up to a deadline."""

from __future__ import annotations

import time
from typing import Any

from shardstream.change_stream import ChangeStream


def collect(stream: ChangeStream, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The next ``count`` events; fail after ``timeout`` seconds."""
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(events) < count:
        assert time.monotonic() < deadline, f"only {len(events)} of {count} events arrived"
        event = stream.try_next()
        if event is not None:
            events.append(event)
    return events
