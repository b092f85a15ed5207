"""End-to-end ``replay --output-format bson`` of the 4-shard mix, against the decode rate.

Run: ``.venv/bin/python -m benchmarks.replay_throughput [ENTRIES_PER_SHARD] [REPEATS]``
(defaults 250000 and 3: 10^6 entries), or ``... replay_throughput plot`` to redraw the
plot from the saved results.  Needs the ``bench`` extra for the plot.

In one run, on the same four ``oplog.bson`` files:

* the baseline: streaming ``bson.decode_file_iter`` of every file to dicts;
* ``shardstream replay --output-format bson`` as a subprocess (startup included), on one
  core and with ``--workers 2`` / ``--workers 4``, with each run's peak RSS;
* in process: the fast merge with and without the collector tuned, the same with the
  shards in 2 threads, and the reference path (decode everything, MergedStream);
* the encoded merge alone (of ready keys and events) and the raw token
  template (hexlify of the assembled KeyString);
* peak RSS of the one-core replay at a tenth of the corpus, to show it does not grow;
* 16 shards of the same total size (one process and ``--workers 2``), next to the
  decode rate of those 16 files.

Prints a table, writes ``benchmarks/results/replay_throughput.json`` and
``benchmarks/replay_throughput.png``.
"""

from __future__ import annotations

import binascii
import json
import platform
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import bson
import pymongo

from benchmarks.corpus import oplog_bytes
from shardstream.bench.offline import (
    Measured,
    Rate,
    Shards,
    count_entries,
    format_table,
    median_rate,
    merge_with_gc_tuning,
    merge_without_gc_tuning,
)
from shardstream.merger.raw.encoded_merge import merge_encoded
from shardstream.replay.engine import reference_batches
from shardstream.replay.shard_workers import shard_batches
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.encoded_stream import EncodedBatch, quiet_collector

HERE = Path(__file__).parent
CORPUS_DIR = Path("/tmp/shardstream-bench")
OPTIONS = ChangeStreamOptions()


def corpus(per_shard: int, shards: int = 4) -> Shards:
    """The seeded 4-shard corpus as files (cached between runs)."""
    directory = CORPUS_DIR / str(per_shard)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(shards):
        path = directory / f"shard{seed}.bson"
        if not path.exists():
            path.write_bytes(oplog_bytes(per_shard, seed=seed))
        paths.append((f"shard{seed}", str(path)))
    return paths


def threaded_merge(shards: Shards, threads: int = 2) -> int:
    """The fast merge with the shards encoded in ``threads`` threads (the GIL's verdict)."""
    merged = OPTIONS.with_options(merged_by_router=True)
    queues: list[queue.Queue[EncodedBatch | None]] = [queue.Queue(8) for _ in shards]

    def work(mine: list[int]) -> None:
        streams = {i: shard_batches(*shards[i], merged) for i in mine}
        while streams:
            for i in list(streams):
                batch = next(streams[i], None)
                queues[i].put(batch)
                if batch is None:
                    del streams[i]

    def drain(i: int) -> Iterator[EncodedBatch]:
        while (batch := queues[i].get()) is not None:
            yield batch

    workers = [
        threading.Thread(target=work, args=([i for i in range(len(shards)) if i % threads == t],))
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    with quiet_collector():
        count = sum(len(batch) for batch in merge_encoded(drain(i) for i in range(len(shards))))
    for worker in workers:
        worker.join()
    return count


def sixteen_shards(per_shard: int, repeats: int) -> list[Rate]:
    """The same measurements on 16 shards of the same total size, with their own baseline."""
    shards = corpus(per_shard, shards=16)
    entries = count_entries(shards)
    measured = Measured()
    measured.add("decode_file_iter, 16-shard files", "entries", lambda: count_entries(shards))
    bson_flags = ["--output-format", "bson"]
    measured.add_subprocess("replay bson, 16 shards, 1 process", shards, bson_flags, entries)
    measured.add_subprocess(
        "replay bson, 16 shards, --workers 2", shards, [*bson_flags, "--workers", "2"], entries
    )
    return measured.run(repeats)


def encoded_merge_alone(shards: Shards, repeats: int) -> Rate:
    """The merge of already encoded (key, event) batches: its own cost."""
    merged = OPTIONS.with_options(merged_by_router=True)
    with quiet_collector():
        ready = [list(shard_batches(name, path, merged)) for name, path in shards]

    def run() -> int:
        with quiet_collector():
            return sum(len(batch) for batch in merge_encoded(iter(batches) for batches in ready))

    return median_rate("encoded merge alone (cut + sorted runs)", "events", run, repeats)


def raw_token_template(repeats: int) -> Rate:
    """The fast path's token: assembled KeyString bytes, hexlified and upper-cased."""
    middle = bytes.fromhex("2B042C0100296E5A1004") + bytes(16) + b"\x46\x3coperationType\x00"
    object_ids = [i.to_bytes(12, "big") for i in range(20_000)]

    def run() -> int:
        ts = 1_700_000_000 << 32
        for object_id in object_ids:
            token = b"\x82" + ts.to_bytes(8, "big") + middle
            binascii.hexlify(token + object_id + b"\x00\x00\x04").upper()
        return len(object_ids)

    return median_rate("token encode (raw template + hex)", "tokens", run, repeats)


def main() -> None:
    per_shard = int(sys.argv[1]) if len(sys.argv) > 1 else 250_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    shards = corpus(per_shard)
    small = corpus(per_shard // 10)
    entries = count_entries(shards)
    size = sum(Path(path).stat().st_size for _, path in shards)
    measured = Measured()
    measured.add("decode_file_iter to dicts (baseline)", "entries", lambda: count_entries(shards))
    bson_flags = ["--output-format", "bson"]
    for workers in (0, 2, 4):
        name = "replay bson, 1 process" if not workers else f"replay bson, --workers {workers}"
        measured.add_subprocess(name, shards, [*bson_flags, "--workers", str(workers)], entries)
    small_entries = count_entries(small)
    measured.add_subprocess(
        f"replay bson, 1 process, {small_entries:,} entries", small, bson_flags, small_entries
    )
    measured.add(
        "fast merge in process, default GC",
        "events",
        lambda: merge_without_gc_tuning(shards, OPTIONS),
    )
    measured.add(
        "fast merge in process, quiet GC", "events", lambda: merge_with_gc_tuning(shards, OPTIONS)
    )
    measured.add("fast merge, shards in 2 threads", "events", lambda: threaded_merge(shards))
    rates = measured.run(repeats)
    decode = rates[0]
    reference = Measured()
    reference.add(
        "reference path (decode all, MergedStream)",
        "events",
        lambda: sum(len(batch) for batch in reference_batches(small, None, OPTIONS)),
    )
    reference.add("decode_file_iter, the same files", "entries", lambda: count_entries(small))
    rates += reference.run(repeats)
    rates += sixteen_shards(per_shard * 4 // 16, repeats)
    rates.append(encoded_merge_alone(shards, repeats))
    rates.append(raw_token_template(repeats))
    header = (
        f"python {platform.python_version()}, pymongo {pymongo.version} (C extension: "
        f"{bson.has_c()}), {platform.machine()}; 4 shards, {entries:,} entries, "
        f"{size / entries:.0f} bytes/entry; median of {repeats}, run round robin"
    )
    print(header)
    print(format_table(rates, decode))
    one_core = rates[1].per_second
    print(f"--workers 2 / one core: {rates[2].per_second / one_core:.2f}x")
    by_name = {rate.name: rate.per_second for rate in rates}
    decode16 = by_name["decode_file_iter, 16-shard files"]
    one16 = by_name["replay bson, 16 shards, 1 process"]
    print(
        f"16 shards: one process / decode of the same 16 files: {one16 / decode16:.2f}x; "
        f"--workers 2 / one process: {by_name['replay bson, 16 shards, --workers 2'] / one16:.2f}x"
    )
    results = {
        "header": header,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rates": [rate.to_json() for rate in rates],
    }
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "replay_throughput.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(rates, decode, header, HERE / "replay_throughput.png")


def plot(rates: list[Rate], baseline: Rate, title: str, path: Path) -> None:
    """Two panels: each entry rate as a multiple of the decode rate, and CPU per entry."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (pip install -e '.[bench]'): no plot")
        return
    # The reference path runs on a tenth of the corpus with its own decode baseline;
    # only its CPU per event is comparable here, so its baseline is left out.
    shown = [
        rate
        for rate in rates
        if (rate.unit == "entries" or rate.cpu_us is not None) and "same files" not in rate.name
    ]
    names = [rate.name for rate in shown]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    ratios = [rate.per_second / baseline.per_second for rate in shown]
    errors = [ratio * rate.spread / 2 for ratio, rate in zip(ratios, shown, strict=True)]
    left.barh(names, ratios, xerr=errors, color="#4a7ab5")
    left.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    left.set_xlabel("rate / decode_file_iter rate (same run; bars: spread)")
    right.barh(names, [rate.cpu_us or 0 for rate in shown], color="#b5804a", label="all processes")
    right.barh(
        names,
        [rate.main_cpu_us or 0 for rate in shown],
        color="#6b4a2a",
        height=0.4,
        label="main process",
    )
    right.axvline(baseline.cpu_us or 0, color="grey", linestyle="--", linewidth=1)
    right.set_xlabel("CPU microseconds per item (user + system)")
    right.legend(fontsize=7)
    left.invert_yaxis()
    figure.suptitle(title, fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    print(f"plot: {path}")


def plot_saved_results() -> None:
    """Redraw the plot from benchmarks/results/replay_throughput.json."""
    results = json.loads((HERE / "results" / "replay_throughput.json").read_text())
    rates = [Rate(**rate) for rate in results["rates"]]
    plot(rates, rates[0], results["header"], HERE / "replay_throughput.png")


if __name__ == "__main__":
    if sys.argv[1:] == ["plot"]:
        plot_saved_results()
    else:
        main()
