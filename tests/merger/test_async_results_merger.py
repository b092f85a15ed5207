"""The merge gate, promises and high-water mark of AsyncResultsMerger, rule by rule."""

from __future__ import annotations

import random

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import MergeError
from shardstream.merger import AsyncResultsMerger
from shardstream.resume_token import ResumeToken, encode_token, high_water_mark
from shardstream.transform import ChangeEvent, ChangeStreamOptions, transform_oplog
from tests import factories as make


def _event(ts: Timestamp, key: str) -> ChangeEvent:
    (event,) = transform_oplog([make.insert(ts, {"_id": key})], ChangeStreamOptions())
    return event


def _hwm(ts: Timestamp) -> ResumeToken:
    return encode_token(high_water_mark(ts))


T1, T2, T3 = Timestamp(10, 1), Timestamp(10, 2), Timestamp(10, 3)


def _merger(*names: str) -> AsyncResultsMerger:
    merger = AsyncResultsMerger()
    for name in names:
        merger.add_remote(name)
    return merger


def test_nothing_is_ready_until_every_remote_has_promised() -> None:
    merger = _merger("a", "b")
    merger.add_batch("a", [_event(T1, "x")], _hwm(T3))
    assert not merger.ready()
    merger.add_batch("b", [], _hwm(T1))
    assert merger.ready() is False  # x at T1 sorts after b's promise HWM(T1)
    merger.add_batch("b", [], _hwm(T2))
    assert merger.ready()
    assert merger.next_ready().document["documentKey"] == {"_id": "x"}
    merger._check()


def test_an_event_equal_to_the_minimum_promise_is_released() -> None:
    merger = _merger("a", "b")
    event = _event(T2, "x")
    merger.add_batch("a", [event], event.token)
    merger.add_batch("b", [], event.token)
    assert merger.ready()


def test_a_promise_below_the_batch_is_refused() -> None:
    merger = _merger("a")
    with pytest.raises(MergeError, match="at or above its last event"):
        merger.add_batch("a", [_event(T2, "x")], _hwm(T1))


def test_promises_never_go_backwards() -> None:
    merger = _merger("a")
    merger.add_batch("a", [], _hwm(T2))
    with pytest.raises(MergeError, match="went backwards"):
        merger.add_batch("a", [], _hwm(T1))


def test_events_must_be_above_the_previous_promise() -> None:
    merger = _merger("a")
    merger.add_batch("a", [], _hwm(T3))
    with pytest.raises(MergeError, match="above its previous promise"):
        merger.add_batch("a", [_event(T2, "x")], _hwm(T3))


def test_an_exhausted_remote_leaves_the_gate_but_its_events_drain() -> None:
    merger = _merger("a", "b")
    late = _event(T3, "late")
    merger.add_batch("a", [late], late.token, exhausted=True)
    merger.add_batch("b", [_event(T1, "early")], _hwm(T2))
    first = merger.next_ready()
    assert first.document["documentKey"] == {"_id": "early"}
    assert not merger.ready()  # "late" waits for b's promise to pass T3
    merger.add_batch("b", [], _hwm(Timestamp(11, 1)), exhausted=True)
    assert merger.next_ready().document["documentKey"] == {"_id": "late"}
    assert merger.drained()


def test_high_water_mark_is_last_event_then_minimum_promise_when_drained() -> None:
    merger = _merger("a", "b")
    merger.set_high_water_mark(_hwm(Timestamp(9, 1)))
    merger.add_batch("a", [_event(T1, "x")], _hwm(T3))
    merger.add_batch("b", [], _hwm(T2))
    event = merger.next_ready()
    assert merger.high_water_mark == event.token
    assert merger.finish_batch() == _hwm(T2)  # nothing ready: the minimum promise
    merger.add_batch("b", [], _hwm(T3))
    assert merger.finish_batch() == _hwm(T3)


def test_high_water_mark_stays_when_the_minimum_is_ineligible() -> None:
    merger = _merger("a")
    merger.add_remote("config", config_cursor=True)
    merger.set_high_water_mark(_hwm(T1))
    merger.add_batch("a", [], _hwm(T3))
    merger.add_batch("config", [], _hwm(T2))  # a first batch is never eligible
    assert merger.finish_batch() == _hwm(T1)
    merger.add_batch("config", [], _hwm(T3))  # strictly later than its previous promise
    assert merger.finish_batch() == _hwm(T3)


def test_the_config_cursor_follows_the_server_eligibility_rules() -> None:
    # async_results_merger.cpp _checkHighWaterMarkEligibility (SERVER-47810).
    merger = _merger("a")
    merger.add_remote("config", config_cursor=True)
    merger.set_high_water_mark(_hwm(T2))  # a start time the monitor has not reached
    merger.add_batch("a", [], _hwm(Timestamp(20, 1)))
    merger.add_batch("config", [], _hwm(T1))
    merger.add_batch("config", [], _hwm(T2))  # caught up with the mark, and above its last
    assert merger.finish_batch() == _hwm(T2)
    added = _event(T3, "shard")
    merger.add_batch("config", [added], added.token)  # events: ineligible
    merger.next_ready()
    assert merger.high_water_mark == _hwm(T2)  # an ineligible remote's event is not a mark
    merger.add_batch("config", [], added.token)  # same promise after an ineligible batch
    assert merger.finish_batch() == _hwm(T2)
    merger.add_batch("config", [], _hwm(Timestamp(11, 1)))
    assert merger.finish_batch() == _hwm(Timestamp(11, 1))
    merger._check()


def test_equal_tokens_from_two_remotes_both_come_out_in_remote_order() -> None:
    merger = _merger("a", "b")
    drop = _event(T1, "same")
    merger.add_batch("b", [drop], drop.token)
    merger.add_batch("a", [drop], drop.token)
    assert [merger.next_ready(), merger.next_ready()] == [drop, drop]
    assert not merger.ready()


def test_a_closed_remote_stops_gating() -> None:
    merger = _merger("a", "b")
    merger.add_batch("a", [_event(T2, "x")], _hwm(T3))
    merger.add_batch("b", [], _hwm(T1))
    assert not merger.ready()
    merger.close_remote("b")
    assert merger.ready()
    merger._check()


def test_next_ready_refuses_when_not_ready() -> None:
    with pytest.raises(MergeError, match="no event is ready"):
        _merger("a").next_ready()


@pytest.mark.parametrize("seed", range(5))
def test_pop_ready_is_next_ready_in_a_loop(seed: int) -> None:
    rng = random.Random(seed)
    names = ["a", "b", "c"]
    one_by_one, batched = _merger(*names), _merger(*names)
    times = dict.fromkeys([*names, "config"], 0)
    released = 0
    for merger in (one_by_one, batched):
        merger.add_remote("config", config_cursor=True)
    for step in range(40):
        name = rng.choice([*names, "config"])
        if one_by_one.is_exhausted(name):
            continue
        events = []
        if name != "config":
            for _ in range(rng.randint(0, 3)):
                times[name] += rng.randint(1, 3)
                events.append(_event(Timestamp(10, times[name] * 10), f"{name}{step}"))
            times[name] += rng.randint(0, 2)
        else:
            times[name] = max(times[name], step)
        promise = _hwm(Timestamp(10, times[name] * 10 + 5))
        exhausted = rng.random() < 0.05
        for merger in (one_by_one, batched):
            merger.add_batch(name, list(events), promise, exhausted=exhausted)
        expected = []
        while one_by_one.ready() and len(expected) < 4:
            expected.append(one_by_one.next_ready())
        assert batched.pop_ready(4) == expected
        released += len(expected)
        assert batched.high_water_mark == one_by_one.high_water_mark
        assert batched.finish_batch() == one_by_one.finish_batch()
        batched._check()
    assert released > 10


def test_pop_ready_can_stop_after_a_config_event_leaving_the_mark_before_it() -> None:
    merger = _merger("a")
    merger.add_remote("config", config_cursor=True)
    first, internal, last = _event(T1, "x"), _event(T2, "shard"), _event(T3, "y")
    merger.add_batch("config", [internal], internal.token)
    merger.add_batch("config", [], internal.token)  # an equal promise: still ineligible
    merger.add_batch("a", [first, last], _hwm(Timestamp(11, 1)))
    merger.add_batch("config", [], _hwm(Timestamp(11, 1)))  # now eligible, internal buffered
    assert merger.pop_ready(10, stop_after_config=True) == [first, internal]
    assert merger.high_water_mark == first.token
    assert merger.pop_ready(10, stop_after_config=True) == [last]
    merger._check()
