"""The sync's own CPU per event, stage by stage, with issue 28's changes off and on.

Run: ``.venv/bin/python -m benchmarks.sync_cpu_stages [ENTRIES_PER_SHARD] [ROUNDS]
[--only=CHANGE ...]`` (defaults 5000 and 2: 20,883 events of the seeded 4-shard corpus,
served by an emulated source in its own process; ``--only`` switches off just the changes
named, of ``fast_path``, ``by_command``, ``joined_transactions``, ``raw_documents``,
``write_statements`` and ``fast_resume``).

Each round measures, in this process (CPU seconds / events, every thread):

* ``read``: ``watch()`` with the sync's options, each event taken as the bytes the merge
  wrote (``try_next_raw``): tailers, merge, transform;
* ``+ decode``: the same, each event decoded to the dict the Python planner reads
  (``take_decoded(sync_event, ...)``);
* ``+ plan``: each event planned as its target write as the sync's reader plans it
  (``event_planner.EventPlanner``: from its bytes in C where it can, else decoded and
  planned by ``apply_rules.plan_event``);
* ``read, resumed mid-corpus``: ``read`` of the corpus's second half, resumed after the
  token halfway as a sync resumes after its checkpoint (``fast_resume``);
* ``sync``: a whole ``SyncJob`` (phase 2 from the corpus's start) into a target whose mongos
  only acknowledges the corpus's writes (``EmulatedMongos.acknowledge_only``), with 1 and 2
  writers; the target process's CPU beside it;

and once, pymongo's own CPU for the writes the sync sends (per write, per command, per
transaction) into the same kind of target: the floor of the sync's writing. Each round also
takes the marginal CPU per event (the CPU of a run over a 500-entries-per-shard corpus taken
off, so the start, the connections and the idle exit's second do not count) of the sync
(after) and of ``shardstream replay --output-format bson`` of the same corpus's files (its
process's CPU), and gives the sync's as a multiple of replay's, measured in the same run: the
machine is shared, and its speed varies by 2-3x from day to day.

Each stage runs twice per round, interleaved: ``before``, the six changes of issue 28 item
5 switched off as they were at aa349c2 (expanded events and raw update descriptions on
the reference path; one ordered bulk write per namespace run, cut by the driver at every
switch between updates and deletes; one target transaction per source transaction; each
event decoded whole; every event planned in Python; a resumed stream on the reference
path), and ``after``, this tree.  Interleaving keeps a noisy machine's drift out of the
comparison.  Since the writes go out as their statements' bytes
(``cluster_sync/statement_commands.py``) the bulk API is no longer on the sync's path, so
``before`` sends statements too: it is slower than aa349c2 was by the planning in Python
alone, not by pymongo's per-write cost, which it no longer pays.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymongo
from pymongo.client_session import ClientSession
from pymongo.operations import ReplaceOne
from pymongo.write_concern import WriteConcern

import shardstream
import shardstream.cluster_sync.batch_applier as applier
import shardstream.cluster_sync.batch_reader as reader
import shardstream.cluster_sync.event_planner as planning
import shardstream.cluster_sync.writer_lanes as lanes
import shardstream.stream as stream_module
from benchmarks.cluster_process import ClusterProcess
from benchmarks.corpus import oplog_bytes
from benchmarks.sync_throughput import replay_bson
from benchmarks.timing import machine_line
from shardstream.bench.emulated import CORPUS_START
from shardstream.cluster_sync import SyncJob, SyncOptions
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.merger.raw.encoded_event import decode_event
from shardstream.transform import ChangeStreamOptions

SOURCE_SHARDS = 4
SMALL_PER_SHARD = 500  # the corpus whose CPU is taken off for the marginal figures
CORPUS_DATABASE = "shop"
MAJORITY = WriteConcern("majority")  # as the sync writes
_SWITCHED = (
    (stream_module, "fast_path_applies"),
    (applier, "by_command"),
    (lanes, "_joinable"),
    (planning, "sync_event"),
    (planning, "compiled_statement"),
    (stream_module, "resumed_on_fast_path"),
)
_AFTER = tuple(getattr(module, name) for module, name in _SWITCHED)


def _as_before(options: ChangeStreamOptions) -> bool:
    """The fast path's gate as it was: the sync's options kept the reference path."""
    return (
        bool(_AFTER[0](options))
        and not options.show_expanded_events
        and not options.show_raw_update_description
    )


def _as_is(document: dict[str, Any]) -> dict[str, Any]:
    return document


def _one_run(group: list[Any]) -> list[list[Any]]:
    return [group]


def _never(*_args: Any) -> None:
    return None


# As _SWITCHED, in order.
CHANGES = (
    "fast_path",
    "by_command",
    "joined_transactions",
    "raw_documents",
    "write_statements",
    "fast_resume",
)
_switched_off = set(CHANGES)


def switch(after: bool) -> None:
    """Issue 28 item 5's changes on (``after``), or those chosen off (``--only``)."""
    before = (_as_before, _one_run, _never, decode_event, None, _never)
    for change, (module, name), on, off in zip(CHANGES, _SWITCHED, _AFTER, before, strict=True):
        setattr(module, name, off if not after and change in _switched_off else on)


def read(uri: str, events: int, step: str, **start: Any) -> float:
    """CPU seconds per event of reading ``events`` events, up to ``step``, from ``start``
    (``watch()``'s start options; default: the corpus's start)."""
    namespaces = NamespaceMap()
    cpu, count = time.process_time(), 0
    with shardstream.watch(
        uri,
        show_expanded_events=True,
        show_raw_update_description=True,
        **(start or {"start_at_operation_time": CORPUS_START}),
    ) as stream:
        while count < events:  # bounded: the source holds ``events`` events
            if step == "read":
                count += stream.try_next_raw() is not None
                continue
            if step == "+ decode":  # as the Python planner decodes them (switched)
                taken: list[Any] = stream.take_decoded(vars(planning)["sync_event"], 1000, _as_is)
            else:  # and planned as the sync's reader plans them (in C where it can)
                planner = planning.EventPlanner(namespaces)
                taken = stream.take_decoded(planner.raw, 1000, planner.document)
            if not taken:
                time.sleep(reader.STEP_S)
            count += len(taken)
    return (time.process_time() - cpu) / events


def middle_token(uri: str, events: int) -> dict[str, Any]:
    """The resume token after the first ``events`` events: a sync's checkpoint mid-corpus."""
    with shardstream.watch(
        uri,
        start_at_operation_time=CORPUS_START,
        show_expanded_events=True,
        show_raw_update_description=True,
    ) as stream:
        count = 0
        while count < events:  # bounded: the source holds more events
            count += stream.try_next_raw() is not None
        token = stream.resume_token
    if token is None:
        raise RuntimeError("no resume token after the corpus's first events")
    return token


def sync(uri: str, writers: int) -> tuple[float, float, int]:
    """(sync CPU, target CPU) per event, and events, of a sync into an acknowledging target."""
    with ClusterProcess(2, acknowledge_only=(CORPUS_DATABASE,)) as target:
        options = SyncOptions(
            source=uri, target=target.uri, writers=writers, start_at=CORPUS_START, idle_exit_s=1
        )
        cpu, target_cpu = time.process_time(), target.cpu()
        applied = SyncJob(options).run().applied
        return (
            (time.process_time() - cpu) / applied,
            (target.cpu() - target_cpu) / applied,
            applied,
        )


def replay_cpu(datas: list[bytes]) -> float:
    """CPU seconds of ``shardstream replay --output-format bson`` of the corpus's files (the
    subprocess's own CPU, its start included; ``sync_throughput.replay_bson`` runs it)."""
    with tempfile.TemporaryDirectory() as directory:
        paths = [Path(directory, f"shard{n}.bson") for n in range(len(datas))]
        for path, data in zip(paths, datas, strict=True):
            path.write_bytes(data)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not replay_bson(paths)["events"]:
            raise RuntimeError("replay wrote no events")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def driver_costs(uri: str) -> dict[str, float]:
    """pymongo's CPU (this process) for what the sync sends, into an acknowledging target:
    per write in a 1000-write bulk write, per 3-write command, per 3-write transaction."""
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri)
    orders = client[CORPUS_DATABASE].get_collection("orders", write_concern=MAJORITY)
    writes: list[Any] = [
        ReplaceOne({"_id": n}, {"_id": n, "customer": f"c{n}", "note": "x" * 100}, upsert=True)
        for n in range(1000)
    ]

    def transaction(session: ClientSession) -> None:
        orders.bulk_write(writes[:3], session=session)

    def in_session() -> None:
        with client.start_session() as session:
            session.with_transaction(transaction, write_concern=MAJORITY)

    runs: list[tuple[str, int, int, Callable[[], object]]] = [
        ("per write (1000-write bulk)", 10, 10_000, lambda: orders.bulk_write(writes)),
        ("per command (3 writes)", 1000, 1000, lambda: orders.bulk_write(writes[:3])),
        ("per transaction (3 writes)", 300, 300, in_session),
    ]
    costs = {}
    with client:
        for name, repeat, count, run in runs:
            cpu = time.process_time()
            for _ in range(repeat):
                run()
            costs[name] = (time.process_time() - cpu) / count
    return costs


def main(argv: list[str]) -> int:
    only = [arg.partition("=")[2] for arg in argv if arg.startswith("--only=")]
    if only:  # "before" switches off just these changes
        _switched_off.intersection_update(only)
    argv = [arg for arg in argv if not arg.startswith("--")]
    per_shard = int(argv[0]) if argv else 5000
    rounds = int(argv[1]) if len(argv) > 1 else 2
    print(machine_line())
    datas = [oplog_bytes(per_shard, seed=n) for n in range(SOURCE_SHARDS)]
    results: dict[str, dict[str, list[float]]] = {}

    def measure(name: str, run: Callable[[], float]) -> None:
        for after in (False, True):
            switch(after)
            value = run()
            results.setdefault(name, {}).setdefault("after" if after else "before", []).append(
                value
            )
        switch(True)

    small_datas = [oplog_bytes(SMALL_PER_SHARD, seed=n) for n in range(SOURCE_SHARDS)]
    with (
        ClusterProcess(SOURCE_SHARDS, datas) as source,
        ClusterProcess(SOURCE_SHARDS, small_datas) as small,
    ):
        _, _, events = sync(source.uri, 1)  # also warms both processes up
        print(
            f"{SOURCE_SHARDS} shards x {per_shard:,} entries -> {events:,} events; {rounds} rounds"
        )
        middle = middle_token(source.uri, events // 2)
        rest = events - events // 2
        marginal: dict[str, list[float]] = {}
        for _ in range(rounds):
            small_events = sync(small.uri, 1)[2]
            replay = replay_cpu(datas) - replay_cpu(small_datas)
            marginal.setdefault("replay --output-format bson", []).append(
                replay / (events - small_events)
            )
            for step in ("read", "+ decode", "+ plan"):
                measure(step, lambda step=step: read(source.uri, events, step))  # type: ignore[misc]
            measure(
                "read, resumed mid-corpus",
                lambda: read(source.uri, rest, "read", resume_after=middle, fast_resume=True),
            )
            for writers in (1, 2):
                target: list[float] = []

                def synced(writers: int = writers, target: list[float] = target) -> float:
                    own, theirs, _ = sync(source.uri, writers)
                    target.append(theirs)
                    return own

                name = f"sync, {writers} writer(s)"
                measure(name, synced)
                kept = results.setdefault(f"  target, {writers} writer(s)", {})
                kept.setdefault("before", []).extend(target[::2])
                kept.setdefault("after", []).extend(target[1::2])
                own, _, small_events = sync(small.uri, writers)
                full = results[name]["after"][-1] * events
                marginal.setdefault(name, []).append(
                    (full - own * small_events) / (events - small_events)
                )
        with ClusterProcess(2, acknowledge_only=(CORPUS_DATABASE,)) as target_process:
            driver = driver_costs(target_process.uri)
    print(
        f"{'CPU us/event (min of rounds)':32s} {'before':>8s} {'after':>8s} {'after/before':>13s}"
    )
    for name, values in results.items():
        before, after = min(values["before"]) * 1e6, min(values["after"]) * 1e6
        print(f"{name:32s} {before:8.0f} {after:8.0f} {after / before:13.2f}")
    print(
        f"marginal CPU us/event of the full corpus over a {SMALL_PER_SHARD}-entries-per-shard "
        "one (min of rounds; after):"
    )
    replay = min(marginal["replay --output-format bson"])
    for name, costs in marginal.items():
        ratio = "" if name.startswith("replay") else f" {min(costs) / replay:6.1f}x replay"
        print(f"  {name:30s} {min(costs) * 1e6:8.1f}{ratio}")
    print("pymongo into the acknowledging target, CPU us:")
    for name, cost in driver.items():
        print(f"  {name:30s} {cost * 1e6:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
