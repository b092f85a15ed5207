"""Shared timing for the benchmark scripts: a median rate over repeats, with its spread; and
the scratch directories their corpora and tables live in."""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import bson
import pymongo

_scratch_root: Path | None = None


def scratch_directory(prefix: str) -> Path:
    """A fresh directory for a benchmark's files, under one root per process that is
    removed when the process exits: a run's corpus and tables take hundreds of MB, and
    left behind, repeated runs fill the disk. ``SHARDSTREAM_KEEP_BENCH_FILES=1`` keeps
    them (the root is printed) to look at."""
    global _scratch_root
    if _scratch_root is None:
        _scratch_root = Path(tempfile.mkdtemp(prefix="shardstream-bench-"))
        if os.environ.get("SHARDSTREAM_KEEP_BENCH_FILES"):
            print(f"benchmark files kept in {_scratch_root}")
        else:
            atexit.register(shutil.rmtree, _scratch_root, True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_scratch_root))


def median_rate(
    run: Callable[[], int], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float, int]:
    """Time ``run`` (which returns how many items it produced) ``repeats`` times.

    ``clock``: wall time by default; ``time.process_time`` gives items per CPU-second of
    this process, which other jobs on a shared machine hardly change.

    Returns (median items/s, (max - min) / median, items of the last run).
    """
    rates, produced = [], 0
    for _ in range(repeats):
        began = clock()
        produced = run()
        rates.append(produced / (clock() - began))
    median = statistics.median(rates)
    return median, (max(rates) - min(rates)) / median, produced


def machine_line() -> str:
    """Python, pymongo (and whether its C extension is in), machine, cores and load now."""
    return (
        f"python {platform.python_version()}, pymongo {pymongo.version} (C extension: "
        f"{bson.has_c()}), {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}"
    )


def process_tree_cpu(root: int | None = None) -> float:
    """CPU seconds (user + system) of a process and every live descendant, with what their
    reaped children used (Linux ``/proc``): a Spark run's driver, JVM and Python workers."""
    return sum(sum(row[2:]) for row in process_rows(root).values()) / os.sysconf("SC_CLK_TCK")


# Spark's Python workers by what they run: the tasks' (on the executors) and the rest,
# which Spark starts on the driver (the streaming source's planner, the data sources'
# lookup and planning).
EXECUTOR_WORKER = "pyspark.worker"
KINDS = ("root", "jvm", "tasks", "driver workers")


def process_rows(root: int | None) -> dict[int, tuple[int, int, int, int, int, int]]:
    """Per process of the tree under ``root`` (default: this one): (start time, parent,
    utime, stime, cutime, cstime) in clock ticks."""
    rows: dict[int, tuple[int, int, int, int, int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        # After the name: state ppid ... utime stime cutime cstime starttime are fields
        # 2, 12-15 and 20.
        utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
        rows[int(entry.name)] = (int(fields[19]), int(fields[1]), utime, stime, cutime, cstime)
    tree = {os.getpid() if root is None else root}
    grew = True
    while grew:
        found = {pid for pid, row in rows.items() if row[1] in tree} - tree
        grew = bool(found)
        tree |= found
    return {pid: rows[pid] for pid in tree if pid in rows}


class CpuByKind:
    """A Spark run's CPU seconds by kind of process: ``root`` (this process), ``jvm``,
    ``tasks`` (Python workers running Spark's tasks: ``pyspark.worker``) and ``driver
    workers`` (every other Python process Spark starts: on the driver).

    Sampled by a thread while the run goes on (every ``every`` seconds, and at both ends),
    each process's own time only: a process that exits is reaped by its parent, whose
    children's time would then hold its CPU under the parent's kind (and twice, with its
    samples); sampled, it keeps its own, less its last fraction of a second (Spark reuses
    its Python workers: few exit during a run).
    """

    def __init__(self, every: float = 0.2) -> None:
        self._every = every
        self._first: dict[tuple[int, int], float] = {}
        self._last: dict[tuple[int, int], tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sampling = 0.0  # CPU seconds the sampling thread spent

    def __enter__(self) -> CpuByKind:
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(first=False)

    def spent(self) -> dict[str, float]:
        """CPU seconds per kind between the run's start and end (the root's without the
        sampling thread's own)."""
        totals = dict.fromkeys(KINDS, 0.0)
        for key, (kind, seconds) in self._last.items():
            totals[kind] += seconds - self._first.get(key, 0.0)
        totals["root"] -= self.sampling
        return totals

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._sample(first=False)
        # Reading /proc costs a few ms a sample, in this process: not the run's.
        self.sampling = time.thread_time()

    def _sample(self, *, first: bool) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        top = os.getpid()
        for pid, (started, _, utime, stime, _, _) in process_rows(None).items():
            kind = "root" if pid == top else process_kind(pid)
            own = utime + stime
            key = (pid, started)
            if first:
                self._first[key] = own / tick
            self._last[key] = (kind, own / tick)


def process_kind(pid: int) -> str:
    """The kind of a Spark run's process ``pid`` (not the root): ``jvm``, ``tasks`` or
    ``driver workers`` (see :class:`CpuByKind`)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "driver workers"
    if words and words[0].endswith(b"java"):
        return "jvm"
    return "tasks" if EXECUTOR_WORKER.encode() in words else "driver workers"


def cpu_split(spent: dict[str, float]) -> dict[str, float]:
    """A Spark run's CPU seconds from :meth:`CpuByKind.spent`: ``cpu`` (every process),
    ``driver_side`` (the driver's Python process and the Python workers Spark starts on
    the driver) and ``tasks`` (the tasks' Python workers)."""
    return {
        "cpu": sum(spent.values()),
        "driver_side": spent["root"] + spent["driver workers"],
        "tasks": spent["tasks"],
    }
