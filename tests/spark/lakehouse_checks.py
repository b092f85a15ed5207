"""Shared checks for the lakehouse tests: simulated streams and the states to compare.

A mirror is compared with the simulator's truth as BSON bytes (field order and types
count), in the shape of :func:`shardstream.sim.apply_events.encoded_state`.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.sim import (
    SimulatedCluster,
    SimulationConfig,
    SimulationResult,
    simulated_sources,
)
from shardstream.sim.apply_events import encoded_state
from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.mirror.bucketed.bucket_writer import EVENT_BUCKET
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.prepare import MERGE_KEY_ORDER
from shardstream.spark.delta.mirror.table import DeltaMirror
from shardstream.spark.ingest.task_writes import LOGGED
from shardstream.spark.source.event_batches import events_to_batch
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from shardstream.transform.extended_json import event_to_json
from shardstream.transform.raw.event_writer import encode_event_document


def simulate(*, seed: int, shards: int = 3, operations: int = 300) -> SimulationResult:
    """One seeded simulated run (migrations and transactions included by default)."""
    return SimulatedCluster(SimulationConfig(seed=seed, shards=shards, operations=operations)).run()


def merged_events(result: SimulationResult, *, seed: int = 0) -> list[ChangeEvent]:
    """The run's whole merged stream, as mongos would emit it."""
    stream = MergedStream(simulated_sources(result, seed=seed), ChangeStreamOptions())
    events: list[ChangeEvent] = []
    while not stream.exhausted:
        events += stream.next_batch(500)[0]
    stream.close()
    return events


def simulated_input(
    source: str, directory: Path, *, seed: int, shards: int, operations: int
) -> tuple[dict[str, str], SimulationResult, list[ChangeEvent]]:
    """A seeded simulated run as the source reads it: ``simulate`` (its tasks run the
    simulator) or ``files`` (the run's oplogs written as BSON files under ``directory``).

    Returns:
        The source's input options, the run, and its whole merged stream.
    """
    result = simulate(seed=seed, shards=shards, operations=operations)
    if source == "files":
        files = result.write_oplogs(directory / "oplogs")
        oplog = ",".join(f"{name}={path}" for name, path in files.items())
        return {"oplog": oplog}, result, merged_file_events(oplog)
    options = {"simulate": "true", "shards": str(shards), "entries": str(operations)}
    return {**options, "seed": str(seed)}, result, merged_events(result)


def merged_file_events(oplog: str, *, raw: bool = True) -> list[ChangeEvent]:
    """The whole merged stream of the oplog files ``oplog`` names (``NAME=PATH,...``, the
    source's option), read raw (the fast path where it applies) or decoded."""
    sources = {}
    for part in oplog.split(","):
        name, path = part.split("=", 1)
        sources[name] = FileOplogSource(name, path, raw_entries=raw)
    stream = MergedStream(sources, ChangeStreamOptions())
    events: list[ChangeEvent] = []
    while not stream.exhausted:
        events += stream.next_batch(1000)[0]
    stream.close()
    return events


def event_batches(events: list[ChangeEvent], size: int) -> list[pa.Table]:
    """The events cut into Arrow tables of ``size`` rows, in stream order."""
    return [
        pa.Table.from_batches([events_to_batch(events[start : start + size])])
        for start in range(0, len(events), size)
    ]


def driver_mirror_rows(root: Path, batches: list[pa.Table]) -> list[dict[str, Any]]:
    """The in-driver one-table mirror's rows (key order) after ``batches``, written under
    ``root``: the oracle of the mirrors written elsewhere (worker processes, Spark's tasks)."""
    mirror = DeltaMirror(root)
    for batch_id, batch in enumerate(batches):
        commit = BatchCommit(app_id="app", batch_id=batch_id, watermark=batch["_id"][-1].as_py())
        mirror.write(mirror.prepare(batch.sort_by("_id")), commit)
    rows: list[dict[str, Any]] = mirror.read_all().sort_by(MERGE_KEY_ORDER).to_pylist()
    return rows


def expected_state(result: SimulationResult) -> dict[Any, dict[bytes, bytes]]:
    """The simulator's true final data, as BSON bytes."""
    return encoded_state(result.final_state)


_TOKENS = iter(range(10**6))


def event_row(
    operation: str,
    *,
    ns: tuple[str, str | None] = ("shop", "orders"),
    _id: Any = None,
    doc: dict[str, Any] | None = None,
    diff: dict[str, Any] | None = None,
    to: tuple[str, str] | None = None,
    fragment: str | None = None,
) -> dict[str, Any]:
    """One event as the mirror reads it (its row columns), with a fresh increasing token."""
    token = f"82{next(_TOKENS):08X}"
    return {
        "_id": token,
        "operationType": operation,
        "clusterTime": {"t": 1, "i": int(token[2:], 16)},
        "db": ns[0],
        "coll": ns[1],
        "documentKey": event_to_json({"_id": _id}) if _id is not None else None,
        "fullDocument": event_to_json(doc) if doc is not None else None,
        "to": event_to_json({"db": to[0], "coll": to[1]}) if to else None,
        "_oplogUpdate": encode_event_document({"$v": 2, "diff": diff})
        if diff is not None
        else None,
        "_fragment": fragment,
    }


def sim_files_option(directory: Path, seed: int, **config: Any) -> str:
    """A simulated 3-shard run written as oplog.bson files: the source's ``oplog`` option."""
    result = SimulatedCluster(SimulationConfig(seed=seed, shards=3, **config)).run()
    paths = result.write_oplogs(directory / f"sim{seed}")
    return ",".join(f"{name}={path}" for name, path in paths.items())


def shuffled_to_buckets(events: pa.Table, buckets: int) -> pa.Table:
    """``events`` as Spark's shuffle by bucket gives them to the tasks (``by_bucket``), here
    bucketed by a CRC of the document ``_id`` (any hash keeping a document in one bucket
    will do): a document's events in its bucket with :data:`EVENT_BUCKET`; an event naming
    no document in every bucket, :data:`LOGGED` in bucket 0's copy only."""
    copies: list[int] = []
    numbers: list[int] = []
    logged: list[bool] = []
    for index, key in enumerate(events["documentKey"].to_pylist()):
        owned = [zlib.crc32(document_id(key).encode()) % buckets] if key else range(buckets)
        copies += [index] * len(owned)
        numbers += owned
        logged += [key is not None or number == 0 for number in owned]
    spread = events.take(pa.array(copies, pa.int64()))
    spread = spread.append_column(EVENT_BUCKET, pa.array(numbers, pa.int32()))
    return spread.append_column(LOGGED, pa.array(logged, pa.bool_()))
