"""``shardstream demo --sync``: a simulated cluster synced live into an emulated one, checked.

The simulator runs a seeded workload on three shards (CRUD, multi-shard transactions,
chunk migrations, DDL); the wire emulator serves the run as a live sharded source, cut at
40 % of its changes (:class:`~shardstream.sim.emulated_source.SimulatedSource`).  A
second emulated cluster is the target.  ``shardstream sync`` copies the source as of T0
(the part of the run before the cut); once the copy is done the rest of the run is
appended to the source's oplogs and reaches the target through the merged change stream;
the sync stops once idle.  Then ``verify`` compares source and target, and the target is
also compared with the simulator's true final data, which no shardstream code produced:
exit code 0 only when both say equal.
"""

from __future__ import annotations

from typing import Any, Final, TextIO

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync import sync, verify
from shardstream.cluster_sync.compare_clusters import compare_namespace
from shardstream.emulator import EmulatedCluster
from shardstream.sim import SimulationConfig
from shardstream.sim.apply_events import encoded_state
from shardstream.sim.emulated_source import SimulatedSource, cluster_state

IDLE_EXIT_S: Final = 1.0  # the rest is in the oplogs before the stream opens: no event comes later
TARGET_SHARDS: Final = 2
# SyncProgress writes "sync <phase>: ..." lines, the first of a phase as it begins; the
# report callback runs on the sync's own thread, so the rest of the run is appended before
# the stream opens, with the copy finished: the copy holds exactly the run up to the cut.
_STREAM_PHASE: Final = "sync stream:"


class _FeedWhenStreaming:
    """The sync's report callback: prints progress, feeds the source's rest at the stream."""

    def __init__(self, source: SimulatedSource, out: TextIO) -> None:
        self._source = source
        self._out = out
        self.fed = False

    def __call__(self, line: str) -> None:
        print(f"  {line}", file=self._out, flush=True)
        if self.fed or not line.startswith(_STREAM_PHASE):
            return
        end = self._source.feed_rest()
        self.fed = True
        print(
            f"  copy done; the rest of the run now reaches the source's oplogs: "
            f"{self._source.events_after_cut} change events, closing no-op at {_time(end)}",
            file=self._out,
            flush=True,
        )


def run_sync_demo(out: TextIO, *, seed: int = 7, operations: int = 400) -> int:
    """Simulate, serve, sync, verify; return 0 when the target equals source and truth."""
    config = SimulationConfig(seed=seed, shards=3, operations=operations, collmod_at=0.5)
    with SimulatedSource(config) as source, EmulatedCluster(shards=TARGET_SHARDS) as target:
        counters = source.result.counters
        print(
            f"simulated {config.shards} shards, {operations} operations (seed {seed}): "
            f"{counters.migrations} chunk migrations, {counters.multi_shard_transactions} "
            f"multi-shard transactions, {counters.collmods} collMods",
            file=out,
        )
        at_cut = sum(len(documents) for documents in source.state_at_cut.values())
        print(
            f"source: {source.cluster.uri} (the run served live by the wire emulator, cut at "
            f"cluster time {_time(source.cut)}: {at_cut} documents and "
            f"{source.events_before_cut} change events up to the cut; the rest after the copy)",
            file=out,
        )
        print(f"target: {target.uri} (an emulated {TARGET_SHARDS}-shard cluster)", file=out)
        print(
            f"shardstream sync --source {source.cluster.uri} --target {target.uri} "
            f"--idle-exit {IDLE_EXIT_S:g}",
            file=out,
        )
        feeder = _FeedWhenStreaming(source, out)
        result = sync(source.cluster.uri, target.uri, idle_exit_s=IDLE_EXIT_S, report=feeder)
        # The stream starts at T0 inclusive: events at T0 itself, already in the copy,
        # are applied again, harmlessly (every write the sync makes is idempotent).
        print(
            f"sync stopped: {result.copied:,} documents copied at T0 {_time(result.t0)}, "
            f"{result.applied:,} events applied from T0 on, {result.conflicts} conflicts",
            file=out,
        )
        if not feeder.fed:
            print("the sync never reached its stream phase: the rest was not fed", file=out)
            return 1
        print(f"shardstream verify --source {source.cluster.uri} --target {target.uri}", file=out)
        report = verify(source.cluster.uri, target.uri)
        for line in report.lines():
            print(f"  {line}", file=out)
        same = _matches_truth(source, target, out)
        return 0 if report.equal and same else 1


def _matches_truth(source: SimulatedSource, target: EmulatedCluster, out: TextIO) -> bool:
    """Print whether the target holds the simulator's final data, and where it differs."""
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        held = cluster_state(client)
    truth = encoded_state(source.result.final_state)
    documents = sum(len(docs) for docs in truth.values())
    same = held == truth
    verdict = "yes" if same else "NO"
    print(
        f"the target holds the simulator's true final data ({documents} documents in "
        f"{len(truth)} collections, byte for byte): {verdict}",
        file=out,
    )
    if same:
        return True
    for ns in sorted(set(held) | set(truth)):
        found = compare_namespace(ns, ns, truth.get(ns, {}), held.get(ns, {}))
        if found.missing_count or found.extra_count or found.different_count:
            print(
                f"  {'.'.join(ns)}: {found.missing_count} missing, {found.extra_count} extra, "
                f"{found.different_count} different",
                file=out,
            )
    return False


def _time(ts: Timestamp) -> str:
    return f"{ts.time},{ts.inc}"
