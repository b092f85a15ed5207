"""Shared timing for the benchmark scripts: a median rate over repeats, with its spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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
