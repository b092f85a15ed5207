"""``shardstream ingest`` of large documents: batches capped by size, and without the cap.

Run from the repository root::

    .venv/bin/python -m benchmarks.large_documents [PER_SHARD] [DOCUMENT_KB]

Two oplog files of PER_SHARD inserts (1,500) of documents of DOCUMENT_KB kilobytes of text
(400), that is 1.2 GB of documents by default, ingested by ``shardstream ingest`` in a
fresh process and lakehouse each (``local[2]``, the default 10,000 events per batch):
merged and per-shard with the default ``--max-bytes-per-batch`` (64m), then merged with
``256m`` and with ``2g``, which lifts the cap above the whole input (the tasks' Arrow
batches are still cut by size, which they were not before the option).  Printed per run:
exit code, wall time, batches and events from the last progress line, the documents'
megabytes per second; for a failed run, its error line and the JVM's out-of-memory line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.timing import scratch_directory
from shardstream.bench.corpus import large_document_files

_RUNS = (
    ("merged, default cap", ["--partition-mode", "merged"]),
    ("perShard, default cap", ["--partition-mode", "perShard"]),
    (
        "merged, --max-bytes-per-batch 256m",
        ["--partition-mode", "merged", "--max-bytes-per-batch", "256m"],
    ),
    (
        "merged, --max-bytes-per-batch 2g",
        ["--partition-mode", "merged", "--max-bytes-per-batch", "2g"],
    ),
)


def run(flags: list[str], extra: list[str], table: Path) -> tuple[int, float, str, str]:
    """One ingest; (exit code, wall seconds, last progress line, error line)."""
    env = {
        **os.environ,
        "TZ": "UTC",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, "-m", "shardstream", "ingest", "--table", str(table), *flags]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--master", "local[2]", *extra],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    lines = (done.stdout + done.stderr).splitlines()
    progress = [line for line in lines if line.startswith("ingest: ")]
    # Ours (the last line), then the JVM's root cause from its log, if it logged one.
    errors = [line for line in lines if line.startswith("shardstream ingest: error:")]
    errors += [line.strip() for line in lines if "OutOfMemory" in line][:1]
    return done.returncode, took, progress[-1] if progress else "", "\n  ".join(errors)


def main(argv: list[str]) -> None:
    per_shard = int(argv[0]) if argv else 1_500
    size = (int(argv[1]) if len(argv) > 1 else 400) * 1000
    work = scratch_directory("shardstream-large-")
    flags = [
        f"--shard={part}" for part in large_document_files(work, 2, per_shard, size).split(",")
    ]
    megabytes = 2 * per_shard * size / 1e6
    print(
        f"2 shards x {per_shard:,} inserts of {size // 1000} KB: {megabytes:,.0f} MB of documents"
    )
    for number, (name, extra) in enumerate(_RUNS):
        code, took, progress, error = run(flags, extra, work / f"lake-{number}")
        if code:
            print(f"{name}: exit {code} after {took:.0f} s; {progress}\n  {error}")
        else:
            print(f"{name}: exit 0, {took:.0f} s, {megabytes / took:.1f} MB/s; {progress}")


if __name__ == "__main__":
    main(sys.argv[1:])
