"""Offline throughput measurements: replay of oplog files against the BSON decode rate.

Shared by ``shardstream bench`` and ``benchmarks/replay_throughput.py``.  Every
replay figure is measured next to the streaming ``bson.decode_file_iter``-to-dicts
rate of the same files in the same run, because this machine's absolute speed
varies from run to run; the ratio is the number that means something.
"""

from __future__ import annotations

import dataclasses
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import bson
from bson.errors import BSONError

from shardstream.errors import OplogError
from shardstream.merger.raw.encoded_merge import merge_encoded
from shardstream.oplog import InputFormat, read_oplog_file
from shardstream.replay.engine import write_bson_events
from shardstream.replay.shard_workers import shard_batches
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.encoded_stream import quiet_collector

Shards = Sequence[tuple[str, str]]
# A subprocess's seconds, peak RSS (MB), CPU seconds (with workers), main process CPU seconds.
Timing = tuple[float, float, float, float]


@dataclasses.dataclass(frozen=True, slots=True)
class Rate:
    """A median rate over repeats.

    Attributes:
        name: what was measured.
        per_second: the median of items / second over the repeats.
        spread: (max - min) / median of the repeats' rates.
        items: the items of one run (entries, events or tokens, see ``unit``).
        unit: what the items are.
        peak_rss_mb: the largest peak resident set of a repeat, for subprocess runs.
        cpu_us: median CPU time (user + system, worker processes included) per item, in
            microseconds: unlike the rate, it hardly changes when other jobs share the cores.
        main_cpu_us: the same for the main process alone (subprocess runs): with workers,
            the merge's share, which bounds the rate the workers can reach.
    """

    name: str
    per_second: float
    spread: float
    items: int
    unit: str
    peak_rss_mb: float | None = None
    cpu_us: float | None = None
    main_cpu_us: float | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)


def median_rate(name: str, unit: str, run: Callable[[], int], repeats: int) -> Rate:
    """Time ``run`` (returning how many items it handled) ``repeats`` times."""
    rates: list[float] = []
    items = 0
    for _ in range(repeats):
        began = time.perf_counter()
        items = run()
        rates.append(items / (time.perf_counter() - began))
    median = statistics.median(rates)
    return Rate(name, median, (max(rates) - min(rates)) / median, items, unit)


def count_entries(shards: Shards) -> int:
    """Decode every file to dicts, streaming, as ``bson.decode_file_iter`` does; count them."""
    count = 0
    for _, path in shards:
        try:
            with Path(path).open("rb") as stream:
                for _ in bson.decode_file_iter(stream):
                    count += 1
        except OSError as exc:
            raise OplogError(f"cannot read oplog file {path!r}: {exc.strerror}") from exc
        except (BSONError, ValueError, OverflowError) as exc:
            # The replay's reader names the byte offset and what it expected there.
            for _ in read_oplog_file(path, InputFormat.BSON):
                pass
            raise OplogError(f"corrupt BSON in {path}: {exc}") from exc
    return count


class _CountingSink:
    """A binary stream that only counts what it is given."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        return len(data)

    def flush(self) -> None:
        """Nothing to flush."""


def replay_in_process(shards: Shards, options: ChangeStreamOptions, *, workers: int = 0) -> int:
    """Run ``replay --output-format bson`` of ``shards`` here; return the bytes written."""
    sink = _CountingSink()
    write_bson_events(shards, None, options, _as_binary(sink), workers=workers)
    return sink.written


def _as_binary(sink: _CountingSink) -> BinaryIO:
    return sink  # type: ignore[return-value]  # duck-typed: write() and flush() only


def merge_without_gc_tuning(shards: Shards, options: ChangeStreamOptions) -> int:
    """The fast merged replay with the collector left at its defaults; return events."""
    merged = options.with_options(merged_by_router=True)
    count = 0
    for batch in merge_encoded(shard_batches(name, path, merged) for name, path in shards):
        count += len(batch)
    return count


def merge_with_gc_tuning(shards: Shards, options: ChangeStreamOptions) -> int:
    """The same with :func:`quiet_collector` around it (what replay does)."""
    with quiet_collector():
        return merge_without_gc_tuning(shards, options)


# Runs the CLI and reports the process's own peak RSS (VmHWM of its address space; the
# rusage maxrss of a child also counts what its parent had when it forked).
_CHILD = (
    "import sys\n"
    "from shardstream.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1]\n"
    "import resource\n"
    "own = resource.getrusage(resource.RUSAGE_SELF)\n"
    "sys.stderr.write(f'VmHWM {hwm} {own.ru_utime + own.ru_stime}\\n')\n"
    "sys.exit(code)\n"
)


def replay_subprocess(shards: Shards, extra: Sequence[str]) -> Timing:
    """Run ``shardstream replay`` on ``shards`` in a new process.

    Returns (seconds, peak RSS in MB, CPU seconds of the process and its workers, CPU
    seconds of the main process alone).

    The output goes to /dev/null; the peak RSS is the main process's (worker processes,
    if any, are not counted).
    """
    argv = [sys.executable, "-c", _CHILD, "replay"]
    for name, path in shards:
        argv += ["--shard", f"{name}={path}"]
    argv += list(extra)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("VmHWM "):
        raise RuntimeError(f"replay failed ({done.returncode}): {lines}")
    _, hwm, own = lines[-1].split()
    return seconds, int(hwm) / 1024, cpu, float(own)


class Measured:
    """Rates measured round robin: each repeat runs every measurement once, in turn.

    On a shared machine the load changes from minute to minute; interleaving puts each
    measurement under the same conditions as the baseline it is compared with.
    """

    def __init__(self) -> None:
        self._runs: list[tuple[str, str, Callable[[], tuple[int, Timing | None]]]] = []

    def add(self, name: str, unit: str, run: Callable[[], int]) -> None:
        """Time ``run``, which returns how many items it handled."""
        self._runs.append((name, unit, lambda: (run(), None)))

    def add_subprocess(self, name: str, shards: Shards, extra: Sequence[str], entries: int) -> None:
        """Time a replay subprocess over ``entries`` entries, with its peak RSS."""

        def run() -> tuple[int, Timing | None]:
            return entries, replay_subprocess(shards, extra)

        self._runs.append((name, "entries", run))

    def run(self, repeats: int) -> list[Rate]:
        """Run every measurement ``repeats`` times, round robin; return the median rates."""
        rates: dict[str, list[float]] = {name: [] for name, _, _ in self._runs}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in self._runs}
        mains: dict[str, list[float]] = {name: [] for name, _, _ in self._runs}
        peaks: dict[str, float] = {}
        items: dict[str, int] = {}
        for _ in range(repeats):
            for name, _, run in self._runs:
                began = time.perf_counter()
                cpu_began = time.process_time()
                count, timing = run()
                seconds = time.perf_counter() - began
                cpu = time.process_time() - cpu_began
                if timing is not None:  # a subprocess: its own time, peak RSS and CPU
                    seconds, rss, cpu, own = timing
                    peaks[name] = max(peaks.get(name, 0.0), rss)
                    mains[name].append(own * 1e6 / count)
                rates[name].append(count / seconds)
                cpus[name].append(cpu * 1e6 / count)
                items[name] = count
        out = []
        for name, unit, _ in self._runs:
            median = statistics.median(rates[name])
            spread = (max(rates[name]) - min(rates[name])) / median
            cpu_us = statistics.median(cpus[name])
            main = statistics.median(mains[name]) if mains[name] else None
            out.append(Rate(name, median, spread, items[name], unit, peaks.get(name), cpu_us, main))
        return out


def format_table(rates: Sequence[Rate], baseline: Rate) -> str:
    """A text table: each rate, its spread, and its ratio to ``baseline``."""
    lines = [
        f"{'what':44s} {'rate':>14s} {'spread':>7s} {'ratio':>6s} {'CPU/item':>9s} "
        f"{'main CPU':>9s} {'peak RSS':>9s}"
    ]
    for rate in rates:
        rss = f"{rate.peak_rss_mb:7.0f}MB" if rate.peak_rss_mb is not None else ""
        cpu = f"{rate.cpu_us:6.2f}us" if rate.cpu_us is not None else ""
        main = f"{rate.main_cpu_us:6.2f}us" if rate.main_cpu_us is not None else ""
        lines.append(
            f"{rate.name:44s} {rate.per_second:10,.0f} {rate.unit[:3]}/s "
            f"{rate.spread:6.1%} {rate.per_second / baseline.per_second:5.2f}x {cpu:>9s} "
            f"{main:>9s} {rss:>9s}"
        )
    return "\n".join(lines)
