"""Shared timing for the benchmark scripts: a median rate over repeats, with its spread."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable

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
