"""Sync: writer lanes keep each document's writes in stream order and never deadlock."""

from __future__ import annotations

import itertools
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.write_statements import DELETE, REPLACE, UPDATE, statement_of
from shardstream.cluster_sync.writer_lanes import (
    JOINED_WRITES_MAX,
    JointRole,
    SegmentItem,
    by_command,
    plan_lanes,
    run_lanes,
)

NS = ("shop", "orders")


def _write(doc: int, seq: int, txn: int | None = None) -> CrudWrite:
    # The token carries the write's stream position, so the tests can check order.
    return CrudWrite(
        NS,
        doc.to_bytes(4, "big"),
        statement_of(REPLACE, {"_id": doc}, {"_id": doc, "seq": seq}),
        REPLACE,
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
            if isinstance(step, JointRole):  # every lane takes part; the first runs it
                assert step.runs == (lane == 0)
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
    steps = {id(role.step): role.step for role in roles}
    assert len(steps) < len(transactions)  # some consecutive ones share a joint step
    for item in transactions:  # whole in one joint step, which has a role in every lane
        mine = [step for step in steps.values() if item[0] in step.writes]
        assert len(mine) == 1
        at = mine[0].writes.index(item[0])
        assert mine[0].writes[at : at + len(item)] == item
        lanes = [n for n, s in enumerate(plan) for r in s if r in roles and r.step is mine[0]]
        assert lanes == [0, 1, 2, 3]


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
    # The transactions of documents 8-9 and 9 are next to each other in the lane (the
    # run between them writes neither): one joint step, one target transaction.
    assert shape == [[10, 11, 13], [0, 1, 2, 12, 14], [15, 16], [17]]


def test_a_transaction_joins_the_joint_step_right_before_it_in_each_of_its_lanes() -> None:
    lane_of = {doc: _lane(_write(doc, 0), 2) for doc in range(12)}
    zero = [doc for doc in range(12) if lane_of[doc] == 0]
    one = [doc for doc in range(12) if lane_of[doc] == 1]
    both_1 = [_write(zero[0], 0, txn=1), _write(one[0], 1, txn=1)]
    both_2 = [_write(zero[1], 2, txn=2), _write(one[1], 3, txn=2)]
    only_zero = [_write(zero[2], 4, txn=3)]
    between = _write(zero[1], 5)  # a later write of a document of both_2
    both_3 = [_write(zero[1], 6, txn=4), _write(one[2], 7, txn=4)]
    plan = plan_lanes([both_1, both_2, only_zero, between, both_3], 2)
    steps = [[w.token["seq"] for w in s.step.writes] for s in plan[0] if isinstance(s, JointRole)]
    # 1, 2 and 3 (its one lane among theirs) joined; 4, after a write of its document,
    # stands alone
    assert steps == [[0, 1, 2, 3, 4], [6, 7]]
    lane_one = [
        [w.token["seq"] for w in s.step.writes] for s in plan[1] if isinstance(s, JointRole)
    ]
    assert lane_one == [[0, 1, 2, 3, 4], [6, 7]]
    # the other way round too: a joint step spans every lane, whatever lanes its first
    # transaction's documents hash to, so a transaction over more lanes joins it
    plan = plan_lanes([only_zero, both_1], 2)
    assert [len(s.step.writes) for s in plan[0] if isinstance(s, JointRole)] == [3]
    assert [len(s.step.writes) for s in plan[1] if isinstance(s, JointRole)] == [3]
    big = [[_write(zero[0], 2 * n, txn=n), _write(one[0], 2 * n + 1, txn=n)] for n in range(60)]
    sizes = [len(s.step.writes) for s in plan_lanes(list(big), 2)[0] if isinstance(s, JointRole)]
    assert sizes == [JOINED_WRITES_MAX, 120 - JOINED_WRITES_MAX]


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
        if first_txn[0] in writes:
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


def test_a_namespace_s_writes_go_as_few_commands_each_document_in_order() -> None:
    rng = random.Random(4)
    writes = []
    for seq in range(300):
        doc = rng.randrange(40)
        kind = rng.choice([REPLACE, UPDATE, DELETE])
        body = {REPLACE: {"_id": doc, "seq": seq}, UPDATE: {"$set": {"seq": seq}}}.get(kind)
        statement = statement_of(kind, {"_id": doc}, body)
        writes.append(CrudWrite(NS, doc.to_bytes(4, "big"), statement, kind, {"seq": seq}, None))
    runs = by_command(writes)
    for run in runs:  # one write command each: deletes alone, or updates and replaces
        assert len({w.deletes for w in run}) == 1
    applied = [w for run in runs for w in run]
    assert sorted(w.token["seq"] for w in applied) == list(range(300))  # each write once
    for doc in range(40):  # each document's writes in stream order
        mine = [w.token["seq"] for w in applied if w.route == doc.to_bytes(4, "big")]
        assert mine == sorted(mine)
    # 300 writes of kinds drawn at random make ~120 commands as an ordered bulk write
    switches = sum(a.deletes != b.deletes for a, b in itertools.pairwise(writes))
    assert switches > 100
    assert len(runs) < 30
