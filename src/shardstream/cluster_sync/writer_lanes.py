"""Sync: the writes between two DDL events, spread over N writer lanes in a safe order.

Each document write goes to the lane of its (target namespace, ``_id``) hash, so one
document's writes stay in stream order on one lane while lanes run in parallel. A source
transaction applied as one target transaction is a *joint step* in every lane, at its
place in the stream: in a lane whose open run writes one of its documents, after that run
(a later write of its documents cannot overtake it, nor it an earlier one); in every other
lane, before the open run, whose writes touch none of its documents and so may follow it.
Its first lane runs it once every lane has reached it; the others wait until it is done.

A transaction right after a joint step in every lane (nothing of any lane between them)
joins it (:func:`_joinable`): one target transaction for several.  That every lane takes
part is what lets consecutive transactions join whatever lanes their documents hash to:
with joint steps only in the lanes of their own documents, 4 lanes made 12 times as many
target transactions as one lane on the benchmark corpus (each costs the sync ~0.7 ms of
CPU: ``benchmarks/README.md``, "Write statements from the events' bytes"), for a wait at
each step by lanes with nothing of it to write.

A lane's run is written per namespace, in write commands (:func:`by_command`).

This cannot deadlock: every lane meets its joint steps in stream order, one total order
for all lanes, so the joint step a lane waits at is never behind one that waits for it
(the same argument as taking locks in a fixed order).
"""

from __future__ import annotations

import dataclasses
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Final

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.namespace_map import Namespace

# Consecutive transactions, the later's lanes among the earlier's, share one target
# transaction up to this many writes (a target transaction's size stays modest).
JOINED_WRITES_MAX: Final = 100
# A segment's items in stream order: a document write, or a transaction's writes.
SegmentItem = CrudWrite | list[CrudWrite]


@dataclasses.dataclass(eq=False)
class JointStep:
    """A transaction met by several lanes: run by the first once all have arrived."""

    writes: list[CrudWrite]
    arrived: threading.Barrier
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    failed: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class JointRole:
    """A lane's part in a joint step: ``runs`` it, or waits for it."""

    step: JointStep
    runs: bool


# A lane's steps: a run of document writes (bulk-written per namespace) or a joint role.
LaneStep = list[CrudWrite] | JointRole


def plan_lanes(segment: Sequence[SegmentItem], lanes: int) -> list[list[LaneStep]]:
    """Each lane's steps for ``segment``: every document's writes in stream order.

    Only a document's own writes are ordered, so a lane's run of writes is not cut at a
    transaction that touches none of its documents: the joint step goes before the run
    (still after the lane's earlier joint steps, so every lane meets them in stream
    order), and the run stays open for later writes.  Runs stay long, hence few bulk
    writes, however many small transactions the stream interleaves.
    """
    plan: list[list[LaneStep]] = [[] for _ in range(lanes)]
    # Each lane's open run (its last step) and the documents it writes, or None.
    open_runs: list[list[CrudWrite] | None] = [None] * lanes
    open_docs: list[set[tuple[Namespace, bytes]] | None] = [None] * lanes
    seeds: dict[Namespace, int] = {}  # one namespace's hash, not one per write
    # Only a transaction reads the runs' documents: without one, none are recorded.
    has_transaction = any(type(item) is list for item in segment)

    def lane_of(write: CrudWrite) -> int:
        if lanes == 1:
            return 0
        seed = seeds.get(write.target)
        if seed is None:
            seed = seeds[write.target] = zlib.crc32(".".join(write.target).encode())
        return zlib.crc32(write.route, seed) % lanes

    for item in segment:
        if type(item) is CrudWrite:  # most items: kept to one call and a few look-ups
            lane = lane_of(item) if lanes > 1 else 0
            run = open_runs[lane]
            if run is None:
                run = open_runs[lane] = []
                plan[lane].append(run)
                open_docs[lane] = set()
            run.append(item)
            if has_transaction:
                docs = open_docs[lane]
                assert docs is not None  # set with the run
                docs.add((item.target, item.route))
            continue
        assert isinstance(item, list)
        touched: dict[int, set[tuple[Namespace, bytes]]] = {}
        for write in item:
            touched.setdefault(lane_of(write), set()).add((write.target, write.route))
        # Every lane takes part (see the module's doc): consecutive transactions then join
        # one target transaction whatever lanes their documents hash to.
        involved = range(lanes)
        places = {}
        for lane in involved:
            docs = open_docs[lane]
            # Before the open run when it writes none of the transaction's documents; else
            # after it, and the run ends here.
            mine = touched.get(lane, ())
            places[lane] = len(plan[lane]) - (docs is not None and docs.isdisjoint(mine))
        joined = _joinable(plan, places, len(item))
        if joined is not None:
            joined.writes.extend(item)
            continue
        step = JointStep(list(item), threading.Barrier(len(involved)))
        for n, lane in enumerate(involved):
            plan[lane].insert(places[lane], JointRole(step, runs=n == 0))
            if places[lane] == len(plan[lane]) - 1:
                open_runs[lane] = open_docs[lane] = None
    return plan


def _joinable(plan: list[list[LaneStep]], places: dict[int, int], size: int) -> JointStep | None:
    """The joint step a transaction can join: the one right before its place in every
    lane, with room for its ``size`` writes; else None.

    In each lane nothing runs between the two, so applying both source transactions as
    one target transaction, at the joint step's place, changes no document's order; each
    stays atomic (its writes commit together with the other's), and a target transaction
    costs the CPU of ~70 writes (``benchmarks/README.md``, "Cluster sync").
    """
    steps = {}
    for lane, place in places.items():
        role = plan[lane][place - 1] if place else None
        if not isinstance(role, JointRole):
            return None
        steps[id(role.step)] = role.step
    if len(steps) != 1:
        return None
    (joint,) = steps.values()
    return joint if len(joint.writes) + size <= JOINED_WRITES_MAX else None


def run_lanes(
    pool: ThreadPoolExecutor,
    plan: list[list[LaneStep]],
    write_run: Callable[[list[CrudWrite]], None],
    transaction: Callable[[list[CrudWrite]], None],
) -> None:
    """Run every busy lane of ``plan`` at once on ``pool``; return when all are done.

    ``pool`` must have a thread for every busy lane (a joint step needs all its lanes
    running). The first error of any lane is raised once every lane has stopped; the
    other lanes stop at their next step, and joint steps release their waiters.
    """
    busy = [steps for steps in plan if steps]
    failed = threading.Event()
    joints = [s.step for steps in busy for s in steps if isinstance(s, JointRole) and s.runs]

    def lane(steps: list[LaneStep]) -> None:
        try:
            for step in steps:
                if failed.is_set():
                    return
                if isinstance(step, list):
                    write_run(step)
                elif not _joint(step, transaction):
                    return
        except BaseException:
            failed.set()
            for joint in joints:  # release every lane waiting at a joint step
                joint.failed = True
                joint.arrived.abort()
                joint.done.set()
            raise

    # Every lane ends before an error is raised: none may still write once the batch
    # has failed (the caller may retry it, or stop).
    futures = [pool.submit(lane, steps) for steps in busy]
    wait(futures)
    for future in futures:
        future.result()


def _joint(role: JointRole, transaction: Callable[[list[CrudWrite]], None]) -> bool:
    """Take part in a joint step; False when the batch failed meanwhile."""
    step = role.step
    try:
        step.arrived.wait()
    except threading.BrokenBarrierError:
        return False
    if role.runs:
        try:
            transaction(step.writes)
        except BaseException:
            step.failed = True
            raise
        finally:
            step.done.set()
        return True
    step.done.wait()
    return not step.failed


def by_namespace(writes: list[CrudWrite]) -> list[tuple[Namespace, list[CrudWrite]]]:
    """The writes grouped per namespace, in order within each (one bulk write each).

    Only a document's own writes are ordered, and a document lives in one namespace, so
    writes to different namespaces need not keep their interleaving; grouping them all
    (not just consecutive ones) makes one bulk write per namespace, not one per switch.
    """
    groups: dict[Namespace, list[CrudWrite]] = {}
    for write in writes:
        groups.setdefault(write.target, []).append(write)
    return list(groups.items())


def by_command(writes: list[CrudWrite]) -> list[list[CrudWrite]]:
    """One namespace's writes as runs that each go out as one write command.

    An ordered bulk write sends a command per run of one kind (``update`` for replaces
    and updates, ``delete`` for deletes), and a command costs as much CPU as ~50 writes
    in it (``benchmarks/README.md``, "Cluster sync"): interleaved deletes made one
    command per 2-3 writes.  Only a document's own writes are ordered, so each write
    goes in the first layer after its document's previous write (that layer itself if
    it is of the same kind: one ordered command keeps them in order); a layer's updates
    and deletes touch different documents and go as two commands.
    """
    layers: list[tuple[list[CrudWrite], list[CrudWrite]]] = []
    last: dict[bytes, tuple[int, bool]] = {}  # document -> (its last layer, was a delete)
    for write in writes:
        deletes = write.deletes
        seen = last.get(write.route)
        layer = 0 if seen is None else seen[0] + (seen[1] is not deletes)
        if layer == len(layers):
            layers.append(([], []))
        layers[layer][deletes].append(write)
        last[write.route] = (layer, deletes)
    return [run for pair in layers for run in pair if run]
