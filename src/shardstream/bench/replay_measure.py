"""The offline bench's measurement: the decode rate of the oplog files (the baseline), the
fast path's replay (in this process, and with ``--workers``) and the reference path's, round
robin in one run, so that every rate is compared with the baseline measured beside it.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import bson

from shardstream.bench.offline import Measured, Shards, count_entries
from shardstream.bench.offline import replay_in_process as replay
from shardstream.errors import ConfigurationError
from shardstream.replay.engine import reference_batches
from shardstream.transform import ChangeStreamOptions


def measure(
    shards: Shards, repeats: int, *, workers: int = 0, reference: bool = True
) -> dict[str, Any]:
    """Measure the decode rate, the fast replay and (optionally) the reference replay."""
    options = ChangeStreamOptions()
    entries = count_entries(shards)
    if not entries:  # rates of nothing: a division by zero, and no measurement
        raise ConfigurationError(
            f"expected oplog entries to measure, got none in {[path for _, path in shards]}"
        )
    measured = Measured()
    measured.add("decode_file_iter to dicts (baseline)", "entries", lambda: count_entries(shards))
    measured.add("replay bson, fast path, 1 process", "entries", _entries(shards, options, 0))
    if workers:
        measured.add(
            f"replay bson, fast path, --workers {workers}",
            "entries",
            _entries(shards, options, workers),
        )
    if reference:
        measured.add(
            "replay bson, reference path",
            "entries",
            lambda: _reference(shards, options, entries),
        )
    rates = measured.run(repeats)
    import pymongo  # for its version only; the offline mode needs no client

    size = sum(Path(path).stat().st_size for _, path in shards)
    header = (
        f"python {platform.python_version()}, pymongo {pymongo.version} (C extension: "
        f"{bson.has_c()}), {platform.machine()}; {len(shards)} shards, {entries:,} entries, "
        f"{size / max(entries, 1):.0f} bytes/entry; median of {repeats}, round robin"
    )
    return {"header": header, "rates": [rate.to_json() for rate in rates]}


def _entries(shards: Shards, options: ChangeStreamOptions, workers: int) -> Any:
    entries = count_entries(shards)

    def run() -> int:
        replay(shards, options, workers=workers)
        return entries

    return run


def _reference(shards: Shards, options: ChangeStreamOptions, entries: int) -> int:
    for _ in reference_batches(shards, None, options):
        pass
    return entries
