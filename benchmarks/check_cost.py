"""What checking entries' bytes costs ``replay --output-format bson``: this tree against another.

Run: ``.venv/bin/python -m benchmarks.check_cost BASE_SRC [ENTRIES_PER_SHARD] [ROUNDS]``
(defaults 100000 and 5), where BASE_SRC is the ``src`` folder of the tree to compare with,
e.g. the last commit: ``git archive HEAD | tar -x -C /tmp/base`` and the built ``_ejson``
module copied into ``/tmp/base/src/shardstream/transform/raw/``.

On the 4-shard corpus of ``replay_throughput`` (``corpus.py``), each round replays it once
with each tree (``PYTHONPATH`` set to its ``src``), alternating which goes first, as a
subprocess to /dev/null (start-up included); then, in this process, the fast merge of the
same files with the check and with it skipped, alternating (the check's own cost, under the
same load). Prints each tree's median rate, the ratio, the
CPU time per entry of each, and the compiled check alone (``valid_entry`` over every whole
entry of the corpus, in process: an upper bound, as the fast path checks only ``o`` of a CRUD
entry whose namespace it has seen).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.replay_throughput import corpus
from shardstream.bench.offline import count_entries, replay_subprocess
from shardstream.merger.raw.encoded_merge import merge_encoded
from shardstream.oplog.raw_file_reader import read_raw_oplog_file
from shardstream.replay.shard_workers import shard_batches
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw import mongod_layout, pipeline
from shardstream.transform.raw.bson_check import valid_entry

HERE_SRC = str(Path(__file__).parents[1] / "src")


def _replay(src: str, shards: Sequence[tuple[str, str]]) -> tuple[float, float]:
    """(seconds, CPU seconds) of one one-process BSON replay with the tree at ``src``."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src
    try:
        seconds, _, cpu, _ = replay_subprocess(shards, ["--output-format", "bson"])
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    return seconds, cpu


def _check_alone(shards: Sequence[tuple[str, str]]) -> tuple[float, int]:
    """Seconds of ``valid_entry`` over every entry, and how many entries."""
    documents = [doc for _, path in shards for batch in read_raw_oplog_file(path) for doc in batch]
    began = time.perf_counter()
    accepted = sum(map(valid_entry, documents))
    seconds = time.perf_counter() - began
    assert accepted == len(documents), "the corpus is valid: every entry must pass"
    return seconds, len(documents)


def _merge_cpu(shards: Sequence[tuple[str, str]]) -> float:
    """CPU us per event of the fast merge of ``shards`` in this process (what replay runs)."""
    options = ChangeStreamOptions().with_options(merged_by_router=True)
    streams = [shard_batches(name, path, options) for name, path in shards]
    began = time.process_time()
    events = sum(len(batch) for batch in merge_encoded(streams))
    return (time.process_time() - began) * 1e6 / events


def _in_process(shards: Sequence[tuple[str, str]], rounds: int) -> dict[str, float]:
    """Median CPU us per event with the check, and with it replaced by "yes" (alternating)."""
    runs: dict[str, list[float]] = {"with the check": [], "check skipped": []}
    for round_number in range(rounds):
        names = list(runs) if round_number % 2 == 0 else list(runs)[::-1]
        for name in names:
            check = valid_entry if name == "with the check" else _yes
            setattr(mongod_layout, "valid_entry", check)  # noqa: B010 (the modules' own name)
            setattr(pipeline, "valid_entry", check)  # noqa: B010
            runs[name].append(_merge_cpu(shards))
    setattr(mongod_layout, "valid_entry", valid_entry)  # noqa: B010
    setattr(pipeline, "valid_entry", valid_entry)  # noqa: B010
    return {name: statistics.median(done) for name, done in runs.items()}


def _yes(*_: object) -> bool:
    return True


def main() -> None:
    base = sys.argv[1]
    per_shard = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    shards = corpus(per_shard)
    entries = count_entries(shards)
    runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    trees = [("before", base), ("after", HERE_SRC)]
    for round_number in range(rounds):
        order = trees if round_number % 2 == 0 else trees[::-1]
        for name, src in order:
            runs[name].append(_replay(src, shards))
    rates = {name: statistics.median(entries / s for s, _ in done) for name, done in runs.items()}
    cpus = {
        name: statistics.median(c * 1e6 / entries for _, c in done) for name, done in runs.items()
    }
    print(f"4 shards, {entries:,} entries, {rounds} rounds alternating; median of each:")
    for name, done in runs.items():
        spread = [entries / s for s, _ in done]
        print(
            f"  {name:6}  {rates[name]:>9,.0f} entries/s  (runs {min(spread):,.0f}-"
            f"{max(spread):,.0f})  CPU {cpus[name]:.2f} us/entry"
        )
    print(f"  after/before rate: {rates['after'] / rates['before']:.3f}")
    print(f"  after/before CPU per entry: {cpus['after'] / cpus['before']:.3f}")
    cpu = _in_process(shards, rounds)
    print("  in process, the fast merge of the same files (CPU us/event, median):")
    for name, value in cpu.items():
        print(f"    {name:16} {value:.2f}")
    print(f"    ratio: {cpu['with the check'] / cpu['check skipped']:.3f}")
    seconds, count = _check_alone(shards)
    print(f"  valid_entry alone, whole entries: {seconds * 1e9 / count:.0f} ns/entry ({count:,})")


if __name__ == "__main__":
    main()
