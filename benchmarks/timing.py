"""Shared timing for the benchmark scripts: a median rate over repeats, with its spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_rate(run: Callable[[], int], repeats: int) -> tuple[float, float, int]:
    """Time ``run`` (which returns how many items it produced) ``repeats`` times.

    Returns (median items/s, (max - min) / median, items of the last run).
    """
    rates, produced = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        produced = run()
        rates.append(produced / (time.perf_counter() - began))
    median = statistics.median(rates)
    return median, (max(rates) - min(rates)) / median, produced
