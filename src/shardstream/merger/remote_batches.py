"""What the merge makes of a remote's batch: its order checked, and whether the
``config.shards`` monitor's new promise may become the high-water mark.

A shard's cursor returns its events in sort-key order, each above the postBatchResumeToken
it sent before (the events at or below it were already promised away), and its new
postBatchResumeToken at or above its last event; mongos's ``AsyncResultsMerger`` relies on
it (a remote that broke it would let an event pass the gate out of order).  The merger
checks each batch before it buffers any of it, so a remote that breaks the order fails
the stream with the remote and both keys named, and nothing of that batch is merged.

The monitor's promise gates the merge as a shard's does, but its events are internal, so
its promise becomes the stream's high-water mark only under ``_checkHighWaterMarkEligibility``'s
rules (SERVER-47810): :func:`monitor_promise_eligible`.
"""

from __future__ import annotations

from collections.abc import Sequence

from shardstream.errors import MergeError
from shardstream.resume_token import ResumeToken
from shardstream.transform import ChangeEvent


def check_remote_batch(
    name: str,
    events: Sequence[ChangeEvent],
    previous: ResumeToken | None,
    promise: ResumeToken | None,
) -> None:
    """Check one batch of remote ``name``'s: ``events`` strictly increasing above its
    ``previous`` promise, the new ``promise`` (if any) not below either.

    Raises:
        MergeError: an event at or below the previous promise or the event before it, or a
            promise below the previous one or below the batch's last event.
    """
    floor = previous.data if previous is not None else ""
    for event in events:
        key = event.token.data
        if key <= floor:
            raise MergeError(
                f"remote {name!r}: expected events above its previous promise "
                f"{floor!r} in increasing order, got {key!r}"
            )
        floor = key
    if promise is None:
        return
    if previous is not None and promise.data < previous.data:
        raise MergeError(
            f"remote {name!r}: its promise went backwards, from {previous.data!r} to "
            f"{promise.data!r}"
        )
    if events and promise.data < events[-1].token.data:
        raise MergeError(
            f"remote {name!r}: expected a promise at or above its last event "
            f"{events[-1].token.data!r}, got {promise.data!r}"
        )


def monitor_promise_eligible(
    mark: ResumeToken | None,
    previous: ResumeToken | None,
    promise: ResumeToken,
    *,
    was_eligible: bool,
    has_events: bool,
) -> bool:
    """Whether the monitor's new ``promise`` may become the high-water mark (``mark`` now;
    ``previous``: its promise before; ``was_eligible``: whether that one could).

    Not while the promise is below the mark (a start time in the future is held), not for
    a batch with events (their tokens are not resumable), and after an ineligible batch
    only once the promise strictly increases (an equal promise may still be an internal
    event's token).
    """
    if mark is not None and promise.data < mark.data:
        return False
    if has_events:
        return False
    if was_eligible:
        return True
    return previous is not None and promise.data > previous.data
