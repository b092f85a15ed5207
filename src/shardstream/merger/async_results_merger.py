"""The k-way merge of shard streams, as mongos's AsyncResultsMerger does it.

Server counterpart: ``AsyncResultsMerger`` (src/mongo/s/query/exec/async_results_merger.cpp)
for a sorted, tailable, awaitData change-stream cursor:

* every remote (shard) has a FIFO buffer of events and a *promised minimum sort key*:
  its latest postBatchResumeToken, which never goes backwards;
* the merge queue is a min-heap of remotes by the sort key of their buffer's front;
* the promises sit in an ordered set of (key, remote id), ties broken by remote id;
* the top of the heap may be returned iff its key is <= the minimum promise over all
  remotes that are still open (the owner's own promise included);
* the merged stream's high-water mark (its postBatchResumeToken) is the last event
  returned, or, when nothing is ready at the end of a batch, the minimum promise.

Sort keys are token ``_data`` strings: upper-case hex compares like the bytes.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import deque
from typing import Any

from sortedcontainers import SortedList

from shardstream.errors import MergeError
from shardstream.merger.remote_batches import check_remote_batch, monitor_promise_eligible
from shardstream.resume_token import ResumeToken
from shardstream.transform import ChangeEvent


@dataclasses.dataclass(slots=True)
class _Remote:
    name: str
    buffer: deque[ChangeEvent] = dataclasses.field(default_factory=deque)
    promise: ResumeToken | None = None
    exhausted: bool = False
    # The config.shards monitor's promise gates the merge like any other, but it may only
    # become the high-water mark under monitor_promise_eligible's rules; shards always may.
    config_cursor: bool = False
    eligible_for_high_water_mark: bool = True


class AsyncResultsMerger:
    """Merges the events of named remotes in token order.

    Complexity: O(log r) per event and per promise update, r = number of remotes.
    """

    def __init__(self) -> None:
        self._remotes: dict[int, _Remote] = {}
        self._ids: dict[str, int] = {}
        self._merge_queue: list[tuple[str, int, int]] = []
        self._promises: SortedList[tuple[str, int]] = SortedList()
        self._sequence = 0
        self._high_water_mark: ResumeToken | None = None
        self._open_remotes = 0  # remotes not exhausted: the gate waits for each one's promise

    # -- remotes -----------------------------------------------------------------------

    def add_remote(self, name: str, *, config_cursor: bool = False) -> None:
        """Open a remote; the merge waits for its first promise before releasing events.

        ``config_cursor`` marks the ``config.shards`` monitor, whose events are internal.
        """
        if name in self._ids:
            raise MergeError(f"expected a new remote name, got {name!r} twice")
        remote_id = len(self._ids)
        self._ids[name] = remote_id
        # The monitor starts ineligible so that the first high-water mark comes from a shard.
        self._remotes[remote_id] = _Remote(
            name, config_cursor=config_cursor, eligible_for_high_water_mark=not config_cursor
        )
        self._open_remotes += 1

    def close_remote(self, name: str) -> None:
        """Drop a remote and its promise (a removed shard, when the user allows it)."""
        remote_id = self._ids[name]
        remote = self._remotes[remote_id]
        if remote.exhausted:
            return
        if remote.promise is not None:
            self._promises.remove((remote.promise.data, remote_id))
        remote.exhausted = True
        self._open_remotes -= 1
        remote.buffer.clear()
        self._merge_queue = [item for item in self._merge_queue if item[1] != remote_id]
        heapq.heapify(self._merge_queue)

    @property
    def remote_names(self) -> list[str]:
        """Every remote's name, in the order they were added."""
        return list(self._ids)

    def needs_data(self, name: str) -> bool:
        """Whether to read more from ``name``: its buffer is empty and it is still open.

        A remote with buffered but unready events is not read (mongos only schedules
        getMores for remotes with empty buffers), which also bounds memory.
        """
        remote = self._remotes[self._ids[name]]
        return not remote.exhausted and not remote.buffer

    def buffered(self, name: str) -> int:
        """How many events ``name`` has buffered."""
        return len(self._remotes[self._ids[name]].buffer)

    def is_exhausted(self, name: str) -> bool:
        """Whether ``name`` will deliver nothing more."""
        return self._remotes[self._ids[name]].exhausted

    # -- input -------------------------------------------------------------------------

    def add_batch(
        self,
        name: str,
        events: list[ChangeEvent],
        promise: ResumeToken | None,
        *,
        exhausted: bool = False,
    ) -> None:
        """Take one batch of ``name``'s events with its new promise.

        Raises:
            MergeError: the promise went backwards, or an event sorts at or below the
                remote's previous promise, or a batch is out of order.
        """
        remote_id = self._ids[name]
        remote = self._remotes[remote_id]
        if remote.exhausted:
            raise MergeError(f"remote {name!r} is exhausted, but sent another batch")
        previous = remote.promise
        check_remote_batch(name, events, previous, promise)
        if promise is not None:
            if remote.config_cursor:
                remote.eligible_for_high_water_mark = monitor_promise_eligible(
                    self._high_water_mark,
                    previous,
                    promise,
                    was_eligible=remote.eligible_for_high_water_mark,
                    has_events=bool(events),
                )
            if previous is not None:
                self._promises.remove((previous.data, remote_id))
            self._promises.add((promise.data, remote_id))
            remote.promise = promise
        was_empty = not remote.buffer
        remote.buffer.extend(events)
        if was_empty and remote.buffer:
            self._push(remote_id, remote)
        if exhausted:
            remote.exhausted = True
            self._open_remotes -= 1
            if remote.promise is not None:
                self._promises.remove((remote.promise.data, remote_id))

    def _push(self, remote_id: int, remote: _Remote) -> None:
        self._sequence += 1
        heapq.heappush(self._merge_queue, (remote.buffer[0].token.data, remote_id, self._sequence))

    # -- output ------------------------------------------------------------------------

    def _minimum_promise(self) -> tuple[str, int] | None:
        """The smallest promise of the open remotes; None while one has not promised yet."""
        promises = self._promises
        if len(promises) < self._open_remotes:
            return None
        return promises[0] if promises else None

    def ready(self) -> bool:
        """Whether the smallest buffered event may be returned now."""
        if not self._merge_queue:
            return False
        if not self._open_remotes:
            return True
        minimum = self._minimum_promise()
        return minimum is not None and self._merge_queue[0][0] <= minimum[0]

    def next_ready(self) -> ChangeEvent:
        """Pop the smallest event; call only when :meth:`ready`."""
        if not self.ready():
            raise MergeError("next_ready() called while no event is ready")
        _, remote_id, _ = heapq.heappop(self._merge_queue)
        remote = self._remotes[remote_id]
        event = remote.buffer.popleft()
        if remote.buffer:
            self._push(remote_id, remote)
        if remote.eligible_for_high_water_mark:
            self._high_water_mark = event.token
        return event

    def pop_ready(self, limit: int, *, stop_after_config: bool = False) -> list[ChangeEvent]:
        """Pop up to ``limit`` events, as many :meth:`next_ready` calls while :meth:`ready`.

        The gate (the minimum promise) only moves in :meth:`add_batch`, so it is read once
        and the heap is popped in one loop.  With ``stop_after_config``, the batch ends
        after an event of a ``config_cursor`` remote, which leaves the high-water mark
        where it was before that event: the caller acts on it (a new shard may add a
        remote, which moves the gate) and sets the mark.

        Complexity: O(k log r) for k events.
        """
        out: list[ChangeEvent] = []
        queue = self._merge_queue
        if not queue:
            return out
        if self._open_remotes:
            minimum = self._minimum_promise()
            if minimum is None:
                return out
            gate: str | None = minimum[0]
        else:
            gate = None  # every remote is exhausted: everything buffered is ready
        remotes = self._remotes
        pop = heapq.heappop
        push = heapq.heappush
        last: ChangeEvent | None = None
        while queue and len(out) < limit:
            key, remote_id, _ = queue[0]
            if gate is not None and key > gate:
                break
            pop(queue)
            remote = remotes[remote_id]
            buffer = remote.buffer
            event = buffer.popleft()
            if buffer:
                self._sequence += 1
                push(queue, (buffer[0].token.data, remote_id, self._sequence))
            out.append(event)
            if stop_after_config and remote.config_cursor:
                break  # and the mark stays the one before it: the caller sets it
            if remote.eligible_for_high_water_mark:
                last = event
        if last is not None:
            self._high_water_mark = last.token
        return out

    def finish_batch(self) -> ResumeToken | None:
        """End a batch: when nothing is ready, move the high-water mark up to the minimum promise.

        Returns the stream's postBatchResumeToken (None until anything is known).
        """
        if not self.ready():
            minimum = self._minimum_promise()
            if minimum is not None:
                remote = self._remotes[minimum[1]]
                candidate = remote.promise
                current = self._high_water_mark
                if (
                    remote.eligible_for_high_water_mark
                    and candidate is not None
                    and (current is None or candidate.data > current.data)
                ):
                    self._high_water_mark = candidate
        return self._high_water_mark

    @property
    def high_water_mark(self) -> ResumeToken | None:
        """The current postBatchResumeToken."""
        return self._high_water_mark

    def set_high_water_mark(self, token: ResumeToken) -> None:
        """Set the high-water mark: the start token, or a mark hiding an internal event."""
        self._high_water_mark = token

    def drained(self) -> bool:
        """Whether every remote is exhausted and nothing is buffered."""
        return not self._merge_queue and not self._open_remotes

    def _check(self) -> dict[str, Any]:
        """Invariants, for tests: heap fronts, promise set and buffers agree."""
        fronts = {remote_id for _, remote_id, _ in self._merge_queue}
        for remote_id, remote in self._remotes.items():
            if bool(remote.buffer) != (remote_id in fronts):
                raise MergeError(f"remote {remote.name!r}: buffer and merge queue disagree")
            keys = [event.token.data for event in remote.buffer]
            if keys != sorted(keys):
                raise MergeError(f"remote {remote.name!r}: buffer out of order")
        expected = sorted(
            (r.promise.data, i)
            for i, r in self._remotes.items()
            if r.promise is not None and not r.exhausted
        )
        if list(self._promises) != expected:
            raise MergeError("promise set out of step with the remotes")
        return {"remotes": len(self._remotes), "queued": len(self._merge_queue)}
