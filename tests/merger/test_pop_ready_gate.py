"""The merge gate of AsyncResultsMerger.pop_ready, the batch call the production stream uses.

server: AsyncResultsMerger::_readySortedTailable (src/mongo/s/query/exec/async_results_merger.cpp)
returns the merge queue's smallest event iff compareSortKeys(its key, the minimum promised sort
key) <= 0: an event *equal* to the minimum promise is released; one above it waits.
AsyncResultsMerger::_getMinPromisedSortKey has no minimum until every remote has promised, and
the promise set orders equal keys by remote, as the merge queue does (MergingComparator).

The unit tests pin each edge of that comparison (below, equal, above, ties), so that flipping
``>`` and ``>=`` in pop_ready, or ``<=`` and ``<`` in ready(), fails a named test; the
property test checks every release against a model of the rule over random shards.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import deque

from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.merger import AsyncResultsMerger
from shardstream.resume_token import ResumeToken, encode_token, high_water_mark
from shardstream.transform import ChangeEvent, ChangeStreamOptions, transform_oplog
from tests import factories as make


@functools.cache
def _cached_event(second: int, key: str) -> ChangeEvent:
    (event,) = transform_oplog(
        [make.insert(Timestamp(1000, second), {"_id": key})], ChangeStreamOptions()
    )
    return event


def _event(second: int, key: str, shard: str) -> ChangeEvent:
    """An insert at ``Timestamp(1000, second)``; the same (second, key) is the same token."""
    return dataclasses.replace(_cached_event(second, key), shard=shard)


def _hwm(second: int) -> ResumeToken:
    """A high-water mark: above every event before ``second``, below every event at it."""
    return encode_token(high_water_mark(Timestamp(1000, second)))


def _merger(*names: str) -> AsyncResultsMerger:
    merger = AsyncResultsMerger()
    for name in names:
        merger.add_remote(name)
    return merger


def _labels(events: list[ChangeEvent]) -> list[tuple[str | None, str]]:
    return [(event.shard, event.document["documentKey"]["_id"]) for event in events]


# -- the comparison's edges, one test each -------------------------------------------------


def test_pop_ready_releases_an_event_equal_to_the_minimum_promise() -> None:
    # server: _readySortedTailable compares with <= 0: equal to the minimum promise is ready.
    merger = _merger("a", "b")
    event = _event(5, "x", "a")
    merger.add_batch("a", [event], event.token)
    merger.add_batch("b", [], event.token)
    assert merger.ready()
    assert merger.pop_ready(10) == [event]
    assert merger.high_water_mark == event.token


def test_pop_ready_releases_an_event_equal_to_its_own_remotes_promise() -> None:
    # The lone-shard case the live stream hits first: a batch promising its last event.
    merger = _merger("a")
    first, last = _event(4, "x", "a"), _event(5, "x", "a")
    merger.add_batch("a", [first, last], last.token)
    assert merger.pop_ready(10) == [first, last]
    assert not merger.ready()


def test_pop_ready_holds_an_event_above_the_minimum_promise() -> None:
    # server: _readySortedTailable: compareSortKeys(...) > 0 is not ready.
    merger = _merger("a", "b")
    held = _event(5, "x", "a")
    merger.add_batch("a", [held], held.token)
    merger.add_batch("b", [], _hwm(5))  # just below every event at second 5
    assert not merger.ready()
    assert merger.pop_ready(10) == []
    merger.add_batch("b", [], _hwm(6))
    assert merger.pop_ready(10) == [held]


def test_pop_ready_releases_nothing_until_every_open_remote_has_promised() -> None:
    # server: _getMinPromisedSortKey has no minimum while a remote has not reported one.
    merger = _merger("a", "b")
    event = _event(1, "x", "a")
    merger.add_batch("a", [event], _hwm(9))
    merger.add_batch("b", [], None)
    assert merger.pop_ready(10) == []
    merger.add_batch("b", [], _hwm(9))
    assert merger.pop_ready(10) == [event]


def test_pop_ready_releases_equal_keys_of_two_remotes_in_remote_order_at_the_gate() -> None:
    # Equal sort keys (the same event seen by two shards) tie-break by remote, as the
    # server's MergingComparator and PromisedMinSortKeyComparator do; both equal the gate.
    merger = _merger("a", "b")
    from_b, from_a = _event(5, "x", "b"), _event(5, "x", "a")
    merger.add_batch("b", [from_b], from_b.token)
    merger.add_batch("a", [from_a], from_a.token)
    assert _labels(merger.pop_ready(10)) == [("a", "x"), ("b", "x")]


def test_pop_ready_stops_at_the_first_event_past_the_gate_and_honours_the_limit() -> None:
    merger = _merger("a", "b")
    a_events = [_event(second, "x", "a") for second in (1, 3, 5)]
    b_events = [_event(second, "x", "b") for second in (2, 3, 6)]
    merger.add_batch("a", a_events, a_events[-1].token)  # a promises its 5
    merger.add_batch("b", b_events, b_events[-1].token)  # b promises its 6
    assert _labels(merger.pop_ready(2)) == [("a", "x"), ("b", "x")]  # 1, 2
    assert [e.token for e in merger.pop_ready(10)] == [
        a_events[1].token,  # 3 from a, then 3 from b: a tie, remote order
        b_events[1].token,
        a_events[2].token,  # 5: equal to the minimum promise, released
    ]
    assert merger.pop_ready(10) == []  # b's 6 is above a's promise
    merger.add_batch("a", [], _hwm(7))
    assert merger.pop_ready(10) == [b_events[2]]


def test_pop_ready_drains_everything_once_every_remote_is_exhausted() -> None:
    merger = _merger("a", "b")
    late = _event(9, "x", "a")
    merger.add_batch("a", [late], late.token, exhausted=True)
    merger.add_batch("b", [], _hwm(1))
    assert merger.pop_ready(10) == []  # b's promise gates a's buffered event
    merger.add_batch("b", [], None, exhausted=True)
    assert merger.pop_ready(10) == [late]
    assert merger.drained()


def test_finish_batch_keeps_the_last_event_as_the_mark_while_an_equal_event_waits() -> None:
    # server: AsyncResultsMerger::getHighWaterMark moves to the minimum promise only when
    # !_ready(): with an event equal to it still buffered, the mark must not jump past it.
    merger = _merger("a", "b")
    first, equal = _event(3, "x", "a"), _event(5, "x", "a")
    merger.add_batch("a", [first, equal], equal.token)
    merger.add_batch("b", [], equal.token)
    assert merger.pop_ready(1) == [first]
    assert merger.finish_batch() == first.token  # equal is ready: the mark stays at first
    assert merger.pop_ready(1) == [equal]
    assert merger.finish_batch() == equal.token


# -- the rule as a model, over random shards ---------------------------------------------


@dataclasses.dataclass
class _GateModel:
    """What the gate must release: the rule restated, with none of the merger's structures."""

    names: list[str]
    pending: dict[str, deque[ChangeEvent]] = dataclasses.field(default_factory=dict)
    promises: dict[str, str] = dataclasses.field(default_factory=dict)
    open: set[str] = dataclasses.field(default_factory=set)

    def __post_init__(self) -> None:
        self.pending = {name: deque() for name in self.names}
        self.open = set(self.names)

    def gate(self) -> str | None:
        """The minimum promise over open remotes; "" (nothing passes) while one is missing."""
        if not self.open:
            return None
        if any(name not in self.promises for name in self.open):
            return ""
        return min(self.promises[name] for name in self.open)

    def ready(self) -> list[ChangeEvent]:
        """Every event the gate lets through now, in merge order (key, then remote)."""
        gate = self.gate()
        ready = [
            (event.token.data, self.names.index(name), index, event)
            for name, queue in self.pending.items()
            for index, event in enumerate(queue)
            if gate is None or event.token.data <= gate
        ]
        return [event for *_, event in sorted(ready, key=lambda item: item[:3])]

    def release(self, events: list[ChangeEvent]) -> None:
        for event in events:
            assert event.shard is not None
            assert self.pending[event.shard].popleft() is event


def _drain(merger: AsyncResultsMerger, model: _GateModel, limit: int) -> None:
    """pop_ready until the model has nothing ready; each call checked. Bounded: no hang."""
    for _ in range(sum(len(queue) for queue in model.pending.values()) + 1):
        expected = model.ready()
        assert merger.ready() == bool(expected), f"ready() disagrees; gate {model.gate()!r}"
        got = merger.pop_ready(limit)
        assert _labels(got) == _labels(expected[:limit]), f"gate {model.gate()!r}"
        assert [e.token for e in got] == [e.token for e in expected[:limit]]
        model.release(got)
        if got:
            assert merger.high_water_mark == got[-1].token
        if not expected:
            return
    raise AssertionError("pop_ready kept releasing past the model's count")


@st.composite
def _batch(
    draw: st.DrawFn, floor: ResumeToken | None, second: int, shard: str
) -> tuple[list[ChangeEvent], ResumeToken | None, int]:
    """Events strictly above ``floor``, and a promise at or above them (equal keys often)."""
    events: list[ChangeEvent] = []
    for _ in range(draw(st.integers(0, 3))):
        second += draw(st.integers(0, 1))
        event = _event(second, draw(st.sampled_from(["x", "y"])), shard)
        if floor is None or event.token.data > floor.data:
            events.append(event)
            floor = event.token
    kind = draw(st.sampled_from(["last event", "high-water mark", "none"]))
    if kind == "none":
        return events, None, second
    promise = floor if kind == "last event" and floor is not None else None
    if promise is None:
        candidate = _hwm(second + draw(st.integers(0, 2)))
        promise = candidate if floor is None or candidate.data >= floor.data else floor
    return events, promise, second


@given(st.data())
def test_pop_ready_releases_exactly_what_the_minimum_promise_allows(data: st.DataObject) -> None:
    names = ["a", "b", "c", "d"][: data.draw(st.integers(2, 4), label="shards")]
    limit = data.draw(st.integers(1, 4), label="limit")
    merger, model = _merger(*names), _GateModel(names)
    floors: dict[str, ResumeToken | None] = dict.fromkeys(names)
    seconds = dict.fromkeys(names, 1)
    for _ in range(data.draw(st.integers(1, 20), label="steps")):
        if not model.open:
            break
        name = data.draw(st.sampled_from(sorted(model.open)))
        if data.draw(st.integers(0, 19)) == 0:  # a removed shard the user lets go
            merger.close_remote(name)
            model.open.discard(name)
            model.pending[name].clear()
            model.promises.pop(name, None)
        else:
            events, promise, seconds[name] = data.draw(_batch(floors[name], seconds[name], name))
            exhausted = data.draw(st.integers(0, 14)) == 0
            merger.add_batch(name, events, promise, exhausted=exhausted)
            model.pending[name].extend(events)
            floors[name] = promise or (events[-1].token if events else floors[name])
            if promise is not None:
                model.promises[name] = promise.data
            if exhausted:
                model.open.discard(name)
                model.promises.pop(name, None)
        _drain(merger, model, limit)
        merger._check()
    for name in sorted(model.open):  # the end: every shard exhausted, everything drains
        merger.add_batch(name, [], None, exhausted=True)
        model.open.discard(name)
        model.promises.pop(name, None)
    _drain(merger, model, limit)
    assert merger.drained()
    assert not any(model.pending.values())
