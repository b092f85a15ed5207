"""The sync's marginal machine instructions per event, counted by valgrind: a measure that
does not move with the machine's load.

Run: ``.venv/bin/python -m benchmarks.sync_instructions [SMALL LARGE] [--batch-size N]
[--writers N] [--keep DIR]`` (defaults 500 and 2500 entries per shard, the sync's default
batch size, 1 writer; ``--keep`` leaves callgrind's two output files in DIR, for
``callgrind_annotate``).

CPU seconds per event vary by 20 % or more from run to run on a shared 2-core machine
(``benchmarks/README.md``), which hides a change worth a few percent.  The instructions a
process executes do not: this runs the same sync as ``sync_cpu_stages.py`` (phase 2 from
the corpus's start, 1 writer, into a target that only acknowledges writes; the emulated
clusters in their own processes, not counted) inside ``valgrind --tool=callgrind`` for two
corpus sizes, and prints the difference in instructions over the difference in events: the
cost of an event, without start-up, connecting and the idle exit.  Compare two trees by
running it in each.

The corpora are written to files before the counted process starts (building them is
Python too), and a first run outside valgrind writes every module's compiled bytecode
(``PYTHONPYCACHEPREFIX``, a temporary directory) so that neither counted run compiles what
the other does not.  Needs ``valgrind`` on the PATH (Debian: ``apt-get install valgrind``);
each counted run takes about 30-50x its native time (a few minutes in all).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.cluster_process import ClusterProcess
from benchmarks.corpus import oplog_bytes
from benchmarks.sync_cpu_stages import CORPUS_DATABASE, SOURCE_SHARDS
from shardstream.bench.emulated import CORPUS_START
from shardstream.cluster_sync import SyncJob, SyncOptions
from shardstream.cluster_sync.sync_options import DEFAULT_BATCH

_COLLECTED = re.compile(r"Collected : ([\d,]+)")


def child(directory: str, batch_size: int, writers: int) -> None:
    """The counted process: one sync of the corpus in ``directory``; prints its events."""
    datas = [Path(directory, f"shard{n}.bson").read_bytes() for n in range(SOURCE_SHARDS)]
    with (
        ClusterProcess(SOURCE_SHARDS, datas) as source,
        ClusterProcess(2, acknowledge_only=(CORPUS_DATABASE,)) as target,
    ):
        options = SyncOptions(
            source=source.uri,
            target=target.uri,
            writers=writers,
            start_at=CORPUS_START,
            idle_exit_s=3,  # valgrind slows the sync's threads, not the clusters'
            connect_timeout_s=60,
            batch_size=batch_size,
        )
        print(SyncJob(options).run().applied)


def counted(
    directory: Path, batch_size: int, writers: int, environment: dict[str, str], out: Path
) -> tuple[int, int]:
    """(events, instructions) of one sync of ``directory``'s corpus under callgrind, whose
    output file is ``out``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "benchmarks.sync_instructions",
        "--child",
        str(directory),
        str(batch_size),
        str(writers),
    ]
    run = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    found = _COLLECTED.search(run.stderr)
    if found is None:
        raise RuntimeError(f"expected callgrind's 'Collected' line, got: {run.stderr[-500:]}")
    return int(run.stdout.split()[-1]), int(found.group(1).replace(",", ""))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(argv[1], int(argv[2]), int(argv[3]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind); nothing counted")
        return 1
    batch_size, writers, keep = DEFAULT_BATCH, 1, None
    if "--batch-size" in argv:
        at = argv.index("--batch-size")
        batch_size = int(argv[at + 1])
        del argv[at : at + 2]
    if "--writers" in argv:
        at = argv.index("--writers")
        writers = int(argv[at + 1])
        del argv[at : at + 2]
    if "--keep" in argv:
        at = argv.index("--keep")
        keep = Path(argv[at + 1])
        keep.mkdir(parents=True, exist_ok=True)
        del argv[at : at + 2]
    sizes = [int(arg) for arg in argv] or [500, 2500]
    with tempfile.TemporaryDirectory() as work:
        environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": work}
        results = []
        for size in sizes:
            directory = Path(work, f"corpus{size}")
            directory.mkdir()
            for n in range(SOURCE_SHARDS):
                Path(directory, f"shard{n}.bson").write_bytes(oplog_bytes(size, seed=n))
        # Uncounted, the largest corpus: it imports (and so compiles) all the others do.
        largest = str(Path(work, f"corpus{max(sizes)}"))
        warm = [sys.executable, "-m", "benchmarks.sync_instructions", "--child", largest]
        subprocess.run([*warm, str(batch_size), str(writers)], env=environment, check=True)
        for size in sizes:
            out = Path(keep or work, f"callgrind.{size}")
            corpus = Path(work, f"corpus{size}")
            results.append(counted(corpus, batch_size, writers, environment, out))
    (small_events, small), (large_events, large) = results
    print(
        f"{SOURCE_SHARDS} shards x {sizes[0]:,} and {sizes[1]:,} entries -> {small_events:,} and "
        f"{large_events:,} events; {writers} writer(s), batches of {batch_size:,}"
    )
    print(f"instructions: {small:,} and {large:,}")
    print(
        f"marginal instructions per event: {(large - small) / (large_events - small_events):,.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
