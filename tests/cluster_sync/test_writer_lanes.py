"""Sync: writer lanes keep each document's writes in stream order and never deadlock."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pymongo.operations import ReplaceOne

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.writer_lanes import (
    JointRole,
    SegmentItem,
    plan_lanes,
    run_lanes,
)

NS = ("shop", "orders")


def _write(doc: int, seq: int, txn: int | None = None) -> CrudWrite:
    # The token carries the write's stream position, so the tests can check order.
    return CrudWrite(
        NS,
        doc.to_bytes(4, "big"),
        ReplaceOne({"_id": doc}, {"_id": doc, "seq": seq}, upsert=True),
        {"seq": seq},
        None if txn is None else (b"session", txn),
    )


def _segment(rng: random.Random, size: int, docs: int) -> list[SegmentItem]:
    """Single writes and 2-4-write transactions over ``docs`` documents, in stream order."""
    segment: list[SegmentItem] = []
    seq = 0
    for txn in range(size):
        if rng.random() < 0.2:
            ids = rng.sample(range(docs), rng.randint(2, 4))
            segment.append([_write(doc, seq + n, txn) for n, doc in enumerate(ids)])
            seq += len(ids)
        else:
            segment.append(_write(rng.randrange(docs), seq))
            seq += 1
    return segment


def _flat(segment: list[SegmentItem]) -> list[CrudWrite]:
    return [w for item in segment for w in (item if isinstance(item, list) else [item])]


def _lane(write: CrudWrite, lanes: int = 4) -> int:
    return next(n for n, steps in enumerate(plan_lanes([write], lanes)) if steps)


def test_the_plan_puts_each_write_on_its_document_lane_once_in_order() -> None:
    segment = _segment(random.Random(3), 300, 40)
    plan = plan_lanes(segment, 4)
    seen: list[int] = []
    for lane, steps in enumerate(plan):
        last_by_doc: dict[bytes, int] = {}
        last_joint = -1
        for step in steps:
            if isinstance(step, JointRole):
                lanes = {_lane(write) for write in step.step.writes}
                assert lane in lanes
                assert step.runs == (lane == min(lanes))
                writes = step.step.writes
                assert writes[0].token["seq"] > last_joint  # joint steps in stream order
                last_joint = writes[-1].token["seq"]
            else:
                assert {_lane(write) for write in step} == {lane}
                writes = step
            for write in writes:  # each document's writes in stream order in the lane
                assert write.token["seq"] > last_by_doc.get(write.route, -1)
                last_by_doc[write.route] = write.token["seq"]
            if not isinstance(step, JointRole) or step.runs:
                seen += [w.token["seq"] for w in writes]
    assert sorted(seen) == [w.token["seq"] for w in _flat(segment)]  # every write once
    transactions = [item for item in segment if isinstance(item, list)]
    roles = [s for steps in plan for s in steps if isinstance(s, JointRole)]
    for item in transactions:  # one joint step per transaction, in each of its lanes
        mine = [role for role in roles if role.step.writes is item]
        assert len(mine) == len({_lane(write) for write in item})


def test_a_transaction_cuts_a_lane_s_run_only_where_it_follows_its_own_documents() -> None:
    # One lane: single writes of documents 1-5 around transactions of documents 8 and 9,
    # then a transaction of document 2, which has a write before it.
    singles = [_write(doc, seq) for seq, doc in enumerate([1, 2, 3])]
    segment: list[SegmentItem] = [
        *singles,
        [_write(8, 10, txn=1), _write(9, 11, txn=1)],
        _write(4, 12),
        [_write(9, 13, txn=2)],
        _write(5, 14),
        [_write(2, 15, txn=3), _write(8, 16, txn=3)],
        _write(1, 17),
    ]
    plan = plan_lanes(segment, 1)
    shape = [
        [w.token["seq"] for w in (s.step.writes if isinstance(s, JointRole) else s)]
        for s in plan[0]
    ]
    assert shape == [[10, 11], [13], [0, 1, 2, 12, 14], [15, 16], [17]]


@pytest.mark.parametrize("seed", range(5))
def test_running_the_lanes_applies_every_document_in_stream_order(seed: int) -> None:
    rng = random.Random(seed)
    segment = _segment(rng, 400, 30)
    applied: dict[bytes, list[int]] = {}
    lock = threading.Lock()

    def record(writes: list[CrudWrite]) -> None:
        time.sleep(rng.random() / 2000)  # let the lanes interleave
        with lock:
            for write in writes:
                applied.setdefault(write.route, []).append(write.token["seq"])

    with ThreadPoolExecutor(4) as pool:
        run_lanes(pool, plan_lanes(segment, 4), record, record)
    expected: dict[bytes, list[int]] = {}
    for write in _flat(segment):
        expected.setdefault(write.route, []).append(write.token["seq"])
    assert applied == expected


def test_a_failing_transaction_stops_every_lane_and_raises_its_error() -> None:
    segment = _segment(random.Random(9), 300, 20)
    first_txn = next(item for item in segment if isinstance(item, list))

    def transaction(writes: list[CrudWrite]) -> None:
        if writes is first_txn:
            raise RuntimeError("the target refused the transaction")

    errors: list[BaseException] = []

    def run() -> None:
        with ThreadPoolExecutor(4) as pool:
            try:
                run_lanes(pool, plan_lanes(segment, 4), lambda writes: None, transaction)
            except RuntimeError as exc:
                errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "a lane kept waiting after the failure"
    assert [str(e) for e in errors] == ["the target refused the transaction"]
