"""One ingest's timeline: the cores each kind of process uses, half a second at a time,
the batches' starts and ends, and the driver's CPU per step of each batch.

Run from the repository root::

    .venv/bin/python -m benchmarks.ingest_timeline [PER_SHARD] [MASTER] [BATCH] [LAYOUT]

The benchmark corpus (4 BSON files) at PER_SHARD entries per shard (50,000), perShard,
``maxEventsPerTrigger`` BATCH (50,000), into LAYOUT's tables (``collections``, the
default; ``bucketed``; ``changelog``: ``--no-mirror``), on MASTER (``local[2]``), in this
process.  Each line: seconds since the run began, then the cores used over the last
interval by ``driver`` (this process), ``jvm``, ``tasks`` (the tasks' Python workers) and
``driver workers`` (the Python workers Spark starts on the driver), as
``timing.CpuByKind`` tells them apart.  It shows which phases of a batch keep both cores
busy and which leave one idle (what bounds local[2] against local[1]); the steps show where
the driver's own CPU per batch goes (``TaskWrittenBatches``: planning the tasks' DataFrames,
running them, the commits, the report).
"""

from __future__ import annotations

import functools
import io
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.ingest_throughput import SHARDS, source_options
from benchmarks.timing import machine_line, process_kind, process_rows, scratch_directory

_EVERY_S = 0.5


class _Timeline:
    """Samples every process of the run each ``_EVERY_S`` and keeps each interval's CPU by kind."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.rows: list[tuple[float, dict[str, float]]] = []
        self.marks: list[tuple[float, str]] = []
        self.sampling = 0.0  # CPU seconds the sampling thread spent so far (in this process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def mark(self, text: str) -> None:
        self.marks.append((time.perf_counter() - self.start, text))

    def __enter__(self) -> _Timeline:
        self.start = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        top = os.getpid()
        before = _cpu_by_pid()  # a process that starts later spent all of its CPU since
        while not self._stop.wait(_EVERY_S):
            spent: dict[str, float] = defaultdict(float)
            now = _cpu_by_pid()
            for pid, seconds in now.items():
                kind = "driver" if pid == top else process_kind(pid)
                spent[kind] += seconds - before.get(pid, 0.0)
            before = now
            self.rows.append((time.perf_counter() - self.start, dict(spent)))
            self.sampling = time.thread_time()

    def lines(self) -> list[str]:
        out, marks = [], list(self.marks)
        for at, spent in self.rows:
            while marks and marks[0][0] <= at:
                mark_at, text = marks.pop(0)
                out.append(f"  --- {mark_at:6.1f} {text}")
            cores = "  ".join(
                f"{kind}={seconds / _EVERY_S:.2f}"
                for kind, seconds in sorted(spent.items())
                if seconds > 0.01
            )
            out.append(f"{at:6.1f}  {cores}")
        return out


def _cpu_by_pid() -> dict[int, float]:
    tick = os.sysconf("SC_CLK_TCK")
    return {pid: (row[2] + row[3]) / tick for pid, row in process_rows(None).items()}


def _timed(owner: Any, name: str, steps: dict[str, float], timeline: _Timeline) -> None:
    """Wrap ``owner.name`` so that its CPU seconds (every thread of this process, less the
    timeline's sampling meanwhile) add up in ``steps[name]``."""
    function: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started, sampled = time.process_time(), timeline.sampling
        try:
            return function(*args, **kwargs)
        finally:
            spent = time.process_time() - started - (timeline.sampling - sampled)
            steps[name] += spent

    setattr(owner, name, timed)


def main(argv: list[str]) -> None:
    from shardstream.bench.corpus import corpus_files
    from shardstream.spark.ingest import MirrorLayout, task_batches
    from shardstream.spark.ingest.progress import IngestProgress
    from shardstream.spark.ingest.query import run_ingest
    from shardstream.spark.ingest.session import build_session
    from shardstream.spark.ingest.settings import IngestSettings

    per_shard = int(argv[0]) if argv else 50_000
    master = argv[1] if len(argv) > 1 else "local[2]"
    batch = argv[2] if len(argv) > 2 else "50000"
    layout = argv[3] if len(argv) > 3 else "collections"
    work = scratch_directory("shardstream-timeline-")
    (work / "oplog-option").write_text(corpus_files(work / "oplogs", per_shard, SHARDS))
    print(machine_line())
    print(f"benchmark corpus: {SHARDS} shards x {per_shard:,} entries, {master}, batch {batch}")
    steps: dict[str, float] = defaultdict(float)
    timeline = _Timeline()
    batches = task_batches.TaskWrittenBatches
    for owner, name in ((batches, "_tasks"), (batches, "_report")):
        _timed(owner, name, steps, timeline)
    for name in ("run_tasks", "commit_written"):
        _timed(task_batches, name, steps, timeline)
    spark = build_session(master)
    settings = IngestSettings(
        table=Path(tempfile.mkdtemp(prefix="lake-", dir=work)),
        source_options={
            **source_options(work),
            "partitionMode": "perShard",
            "maxEventsPerTrigger": batch,
        },
        bounded=True,
        mirror=layout != "changelog",  # changelog: --no-mirror
        mirror_layout=MirrorLayout("collections" if layout == "changelog" else layout),
    )
    with timeline:
        call = batches.__call__

        def marked(self: Any, frame: Any, batch_id: int) -> None:
            timeline.mark(f"batch {batch_id} starts")
            call(self, frame, batch_id)
            timeline.mark(f"batch {batch_id} ends")

        batches.__call__ = marked  # type: ignore[method-assign]
        timeline.mark("run_ingest")
        totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
        timeline.mark("done")
    spark.stop()
    print("\n".join(timeline.lines()))
    print(f"{totals.events:,} events in {totals.batches} batches; the driver's CPU s per step:")
    for name, seconds in steps.items():
        print(f"  {name}: {seconds:.3f} ({seconds / max(totals.batches, 1):.3f} a batch)")


if __name__ == "__main__":
    main(sys.argv[1:])
