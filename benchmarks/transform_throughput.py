"""Transformer throughput on one core: a realistic single-shard oplog to change events.

Run: ``.venv/bin/python -m benchmarks.transform_throughput [ENTRIES]``.
Measures, on the same BSON bytes in the same run:
* ``decode_file_iter`` of the bytes to dicts (the floor any Python reader pays);
* the reference pipeline (decode to dicts, ``transform_oplog``), events/s;
* the same plus Extended JSON output (what ``shardstream replay`` does).
Rates are medians of 5 repeats with their spread, and each is also given as a ratio
to the decode rate, which moves with the machine much less than absolute numbers.
"""

from __future__ import annotations

import io
import platform
import sys

import bson
import pymongo

from benchmarks.corpus import oplog_bytes
from benchmarks.timing import median_rate
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.transform import ChangeStreamOptions, event_to_json, transform_oplog

REPEATS = 5


def main(argv: list[str]) -> int:
    entries = int(argv[0]) if argv else 50_000
    data = oplog_bytes(entries, seed=0)
    options = ChangeStreamOptions()

    def decode() -> int:
        return sum(1 for _ in bson.decode_file_iter(io.BytesIO(data), OPLOG_CODEC_OPTIONS))

    def transform() -> int:
        stream = bson.decode_file_iter(io.BytesIO(data), OPLOG_CODEC_OPTIONS)
        return sum(1 for _ in transform_oplog(stream, options))

    def transform_to_json() -> int:
        stream = bson.decode_file_iter(io.BytesIO(data), OPLOG_CODEC_OPTIONS)
        return sum(1 for event in transform_oplog(stream, options) if event_to_json(event.document))

    print(
        f"python {platform.python_version()}, pymongo {pymongo.version} "
        f"(C extension: {bson.has_c()}), {platform.machine()}, one core; "
        f"{entries:,} entries, {len(data) / entries:.0f} bytes/entry"
    )
    decode_rate, spread, _ = median_rate(decode, REPEATS)
    print(f"{'decode_file_iter to dicts':36s} {decode_rate:10,.0f} entries/s  spread {spread:5.1%}")
    for name, run in (
        ("transform (reference path)", transform),
        ("transform + Extended JSON", transform_to_json),
    ):
        rate, spread, events = median_rate(run, REPEATS)
        print(
            f"{name:36s} {rate:10,.0f} events/s   spread {spread:5.1%}  "
            f"({events:,} events; {rate / decode_rate:.2f}x the decode rate)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
