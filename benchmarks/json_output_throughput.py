"""``replay`` to Extended JSON against ``replay --output-format bson``, same corpus, same run.

Run: ``.venv/bin/python -m benchmarks.json_output_throughput [ENTRIES_PER_SHARD] [REPEATS]``
(defaults 100000 and 3). In one run, on the same four ``oplog.bson`` files (the seeded
benchmark corpus), each replay as a subprocess on one core (start-up included):

* ``replay --output-format bson`` (the baseline of the target: EJSON >= 0.5x its rate);
* ``replay`` (canonical Extended JSON, the default) and ``replay --json relaxed``;
* per event, in process, on the events of that replay: the compiled writer, the Python
  walker alone, and ``json_util.dumps(bson.decode(...))`` (what the reference path cost);
  the rates there are events/s of the writer alone; and, if ``python-bsonjs`` is installed
  (it is no dependency), MongoDB's C library in its canonical mode, whose text differs.

Prints a table whose ratio column is each rate against the BSON replay.
"""

from __future__ import annotations

import platform
import struct
import subprocess
import sys
from collections.abc import Callable

import bson
from bson import json_util

from benchmarks.replay_throughput import corpus
from shardstream.bench.offline import Measured, Shards, count_entries, format_table
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.transform.raw.extended_json import bson_to_json, walk_bson_to_json


def replay_events(shards: Shards) -> list[bytes]:
    """The events of the BSON replay, each as its own bytes."""
    flags = [arg for name, path in shards for arg in ("--shard", f"{name}={path}")]
    data = subprocess.run(
        [sys.executable, "-m", "shardstream", "replay", *flags, "--output-format", "bson"],
        check=True,
        capture_output=True,
    ).stdout
    events, pos = [], 0
    while pos < len(data):
        size = struct.unpack_from("<i", data, pos)[0]
        events.append(data[pos : pos + size])
        pos += size
    return events


def main() -> None:
    per_shard = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    shards = corpus(per_shard)
    entries = count_entries(shards)
    events = replay_events(shards)
    sample = events[: len(events) // 10]  # json_util is slow: a tenth of the events
    measured = Measured()
    measured.add_subprocess(
        "replay --output-format bson", shards, ["--output-format", "bson"], entries
    )
    measured.add_subprocess("replay (canonical EJSON)", shards, [], entries)
    measured.add_subprocess("replay --json relaxed", shards, ["--json", "relaxed"], entries)
    measured.add("writer: compiled, canonical", "events", lambda: _each(bson_to_json, events))
    measured.add("writer: Python walker alone", "events", lambda: _each(walk_bson_to_json, sample))
    measured.add("writer: json_util of the decoded event", "events", lambda: _json_util(sample))
    bsonjs = _bsonjs()
    if bsonjs is not None:  # ``pip install python-bsonjs`` to compare; not byte-exact (README)
        measured.add("writer: python-bsonjs CANONICAL", "events", lambda: _each(bsonjs, events))
    rates = measured.run(repeats)
    print(
        f"Python {platform.python_version()}, pymongo bson (C: {bson.has_c()}), "
        f"{platform.machine()}; 4 shards, {entries:,} entries, {len(events):,} events, "
        f"median of {repeats}"
    )
    print(format_table(rates, rates[0]))


def _each(write: Callable[[bytes], str], events: list[bytes]) -> int:
    for event in events:
        write(event)
    return len(events)


def _bsonjs() -> Callable[[bytes], str] | None:
    try:
        import bsonjs  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    mode = bsonjs.CANONICAL

    def dumps(raw: bytes) -> str:
        text: str = bsonjs.dumps(raw, mode=mode)
        return text

    return dumps


def _json_util(events: list[bytes]) -> int:
    options = json_util.CANONICAL_JSON_OPTIONS
    for event in events:
        json_util.dumps(bson.decode(event, codec_options=OPLOG_CODEC_OPTIONS), json_options=options)
    return len(events)


if __name__ == "__main__":
    main()
