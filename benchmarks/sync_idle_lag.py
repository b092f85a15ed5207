"""``shardstream sync``'s apply lag with one idle source shard, with and without nudging it.

Run: ``.venv/bin/python -m benchmarks.sync_idle_lag [SECONDS] [INTERVALS]``
(defaults 30 and ``1``: each row syncs for 30 s; ``--idle-noop-interval 1``).

An emulated 2-shard source (its own process) takes inserts at a steady rate on shard 0
only; shard 1 is idle, and both write a periodic no-op every 10 s (mongod's default
``periodicNoopIntervalSecs``).  The merge may release shard 0's events only once shard 1
has promised nothing earlier, so without help an event waits for shard 1's next no-op.
A sync (phase 2 from the first insert, 2 writers) applies them into an emulated 2-shard
target (its own process); one row per ``--idle-noop-interval`` (none, then each of
INTERVALS).

Apply lag of one document = the target's oplog ``wall`` of its write - the source
document's ``sent`` (its insert time; one machine clock), over the documents written
after a 2 s warm-up.  Reported: p50, p95, max, and the no-ops the sync wrote.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import pymongo
from bson.timestamp import Timestamp

from benchmarks.cluster_process import ClusterProcess
from benchmarks.timing import machine_line
from shardstream.cluster_sync import SyncJob, SyncOptions
from shardstream.cluster_sync.idle_noop import NUDGE_MESSAGE
from shardstream.oplog.live.discovery import discover_cluster

RATE = 200.0  # inserts/s on the busy shard
SERVER_NOOP_S = 10.0
WARM_UP_S = 2.0


def oplog_entries(uri: str, query: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of every shard's oplog (behind the mongos ``uri``) matching ``query``."""
    entries: list[dict[str, Any]] = []
    for shard in discover_cluster(uri).shards:
        member: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(shard.uri, tz_aware=True)
        with member:
            entries += member.local["oplog.rs"].find(query)
    return entries


def apply_lags(target_uri: str, ns: str, since: float) -> list[float]:
    """Seconds from each document's insert to its write on the target, sorted."""
    return sorted(
        entry["wall"].timestamp() - entry["o"]["sent"]
        for entry in oplog_entries(target_uri, {"ns": ns, "op": "i"})
        if entry["o"].get("sent", 0) >= since
    )


def nudges(source_uri: str, since: float) -> int:
    """The no-ops ``--idle-noop-interval`` wrote into the source's oplogs since ``since``."""
    notes = oplog_entries(source_uri, {"op": "n", "o.msg": NUDGE_MESSAGE})
    return sum(1 for entry in notes if entry["wall"].timestamp() >= since)


def one_row(
    source: ClusterProcess, target: ClusterProcess, interval: float | None, seconds: float
) -> dict[str, Any]:
    """Sync for ``seconds`` while the source writes; the apply lags of that run."""
    ns = f"lag.nudge_{interval * 1000:.0f}ms" if interval else "lag.server_noop_only"
    time_s, inc = source.ask("live", (1, RATE, SERVER_NOOP_S, ns))
    began = time.time()
    options = SyncOptions(
        source=source.uri,
        target=target.uri,
        sync_id=ns,
        writers=2,
        start_at=Timestamp(time_s, inc),
        idle_noop_interval_s=interval,
    )
    job = SyncJob(options)
    thread = threading.Thread(target=job.run, name="bench-sync")
    thread.start()
    time.sleep(seconds)
    source.ask("quiet")
    job.stop()
    thread.join(60)
    lags = apply_lags(target.uri, ns, began + WARM_UP_S)
    if not lags:
        raise RuntimeError(f"expected documents of {ns} on the target, found none")
    return {
        "idle_noop_interval_s": interval,
        "documents": len(lags),
        "p50": lags[len(lags) // 2],
        "p95": lags[int(len(lags) * 0.95)],
        "max": lags[-1],
        "nudges": nudges(source.uri, began),
    }


def main(argv: list[str]) -> int:
    seconds = float(argv[0]) if argv else 30.0
    intervals = [float(x) for x in argv[1].split(",")] if len(argv) > 1 else [1.0]
    print(machine_line())
    print(
        f"apply lag, 2 source shards: shard 0 takes {RATE:.0f} inserts/s, shard 1 is idle; "
        f"server no-op every {SERVER_NOOP_S:.0f} s; {seconds:.0f} s per row, seconds"
    )
    print(
        f"  {'--idle-noop-interval':>20s} {'documents':>9s} {'p50':>6s} {'p95':>6s} {'max':>6s}"
        f" {'no-ops written':>14s}"
    )
    with ClusterProcess(2) as source, ClusterProcess(2) as target:
        for interval in [None, *intervals]:
            row = one_row(source, target, interval, seconds)
            label = "off" if interval is None else f"{interval:g} s"
            print(
                f"  {label:>20s} {row['documents']:9d} {row['p50']:6.2f} {row['p95']:6.2f}"
                f" {row['max']:6.2f} {row['nudges']:14d}"
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
