"""Parquet files written on threads while the caller goes on making the next ones.

pyarrow encodes and compresses a file without holding the GIL, so a task that writes several
files (a bucket after another, a history's partitions) can write one while its Python
prepares the next, or write several at once: on a core Spark's slot leaves idle (the driver's
own sink, ``local[1]``) the wall time shrinks by the writes; on a busy one nothing is lost
but a thread switch.  At most ``threads`` writes are in flight, so what is held is at most
that many files' rows beyond what the caller holds itself.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Threads for files already all in memory: enough to fill a small machine's cores, few
# enough that a task per core does not start dozens.
MAX_THREADS: Final = min(4, os.cpu_count() or 1)


def write_behind(
    write: Callable[[Item], Result], items: Iterable[Item], threads: int = 1
) -> list[Result]:
    """``[write(item) for item in items]``, each ``write`` on one of ``threads`` threads while
    ``items`` (a generator: the caller's Python) makes the next.

    The results come in the items' order.  An error of ``write`` is raised here once the
    writes in flight have ended (their files are never committed: a file no commit names is
    never read); an error of ``items`` likewise.
    """
    results: list[Result] = []
    pending: deque[Future[Result]] = deque()
    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="shardstream-write") as pool:
        for item in items:
            pending.append(pool.submit(write, item))
            while len(pending) > threads:
                results.append(pending.popleft().result())
        results.extend(future.result() for future in pending)
    return results
