"""Shared timing for the benchmark scripts: a median rate over repeats, with its spread."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import bson
import pymongo


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
    return sum(process_tree_cpu_by_kind(root).values())


# Spark's Python workers by what they run: the tasks' (on the executors) and the rest,
# which Spark starts on the driver (the streaming source's planner, the writers' commits,
# the data sources' lookup and planning).
EXECUTOR_WORKER = "pyspark.worker"


def process_tree_cpu_by_kind(root: int | None = None) -> dict[str, float]:
    """:func:`process_tree_cpu` split by kind of process: ``root`` (the process itself),
    ``jvm``, ``tasks`` (Python workers running Spark's tasks: ``pyspark.worker``) and
    ``driver workers`` (every other Python process Spark starts: on the driver)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        # After the name: state ppid ... utime stime cutime cstime are fields 2 and 12-15.
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(value) for value in fields[11:15])
    top = os.getpid() if root is None else root
    tree = {top}
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in tree} - tree
        grew = bool(found)
        tree |= found
    kinds = {"root": 0.0, "jvm": 0.0, "tasks": 0.0, "driver workers": 0.0}
    for pid in tree:
        kind = "root" if pid == top else _kind(pid)
        kinds[kind] += times.get(pid, 0) / tick
    return kinds


def _kind(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "driver workers"
    if words and words[0].endswith(b"java"):
        return "jvm"
    return "tasks" if EXECUTOR_WORKER.encode() in words else "driver workers"


def cpu_split(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """A Spark run's CPU seconds between two :func:`process_tree_cpu_by_kind` readings:
    ``cpu`` (every process), ``driver_side`` (the driver's Python process and the Python
    workers Spark starts on the driver) and ``tasks`` (the tasks' Python workers)."""
    spent = {kind: after[kind] - before.get(kind, 0.0) for kind in after}
    return {
        "cpu": sum(spent.values()),
        "driver_side": spent["root"] + spent["driver workers"],
        "tasks": spent["tasks"],
    }
