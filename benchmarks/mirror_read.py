"""The mirror's keyed read: a scan matched in Arrow against a SQL list of literals.

Run from the repository root::

    .venv/bin/python -m benchmarks.mirror_read [MIRROR_ROWS]

A mirror of MIRROR_ROWS documents (600,000 by default; ObjectId ids, ~300-byte documents,
three collections) written once; then, for batches needing 2,000, 7,000 and 25,000 of its
documents (picked at random), the median of five reads each by
``mirror.prepare.load_rows`` (namespaces in the SQL, the ids matched in Arrow) and by one
DataFusion query listing every id as a literal (the read before, run only below 8,000
ids: from about 10,000 literals DataFusion overflowed its stack and crashed the process).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from benchmarks.timing import scratch_directory
from shardstream.spark.delta.mirror.keys import RowKey
from shardstream.spark.delta.mirror.prepare import (
    MIRROR_SCHEMA,
    load_rows,
    quoted,
    sql_literal,
)
from shardstream.spark.delta.mirror.state import BatchNeeds

_COLLECTIONS = ("orders", "customers", "events")
_LITERALS_BELOW = 8_000


def _mirror(path: Path, rows: int) -> list[RowKey]:
    keys = [("shop", _COLLECTIONS[n % 3], f'{{"$oid": "{n:024x}"}}') for n in range(rows)]
    filler = "x" * 240
    write_deltalake(
        str(path),
        pa.Table.from_pydict(
            {
                "db": [db for db, _, _ in keys],
                "coll": [coll for _, coll, _ in keys],
                "documentKey": [f'{{"_id": {i}}}' for _, _, i in keys],
                "fullDocument": [f'{{"_id": {i}, "f": "{filler}"}}' for _, _, i in keys],
                "_id": [f"82{n:016X}" for n in range(rows)],
                "clusterTime": [{"t": 1, "i": n} for n in range(rows)],
                "_documentId": [i for _, _, i in keys],
            },
            schema=MIRROR_SCHEMA,
        ),
    )
    return keys


def _literal_query(path: Path, needs: BatchNeeds) -> int:
    """The read before: every id a literal of one SQL ``IN`` list per namespace."""
    by_namespace: dict[tuple[str, str], list[str]] = {}
    for db, coll, document_id in needs.keys:
        by_namespace.setdefault((db, coll), []).append(document_id)
    condition = " OR ".join(
        f"({quoted('db')} = {sql_literal(db)} AND {quoted('coll')} = {sql_literal(coll)} AND "
        f"{quoted('_documentId')} IN ({', '.join(sql_literal(i) for i in ids)}))"
        for (db, coll), ids in by_namespace.items()
    )
    query = f"SELECT * FROM mirror WHERE {condition}"
    found = pa.table(QueryBuilder().register("mirror", DeltaTable(str(path))).execute(query))
    return len(found.cast(MIRROR_SCHEMA).to_pylist())


def _median_ms(read: Callable[[Path, BatchNeeds], int], path: Path, needs: BatchNeeds) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        if read(path, needs) != len(needs.keys):
            raise AssertionError("a read returned the wrong number of rows")
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main(argv: list[str]) -> None:
    rows = int(argv[0]) if argv else 600_000
    path = scratch_directory("shardstream-mirror-read-") / "mirror"
    keys = _mirror(path, rows)
    print(f"mirror of {rows:,} documents; median of 5 reads each")
    rng = random.Random(1)
    for wanted in (2_000, 7_000, 25_000):
        needs = BatchNeeds(frozenset(rng.sample(keys, wanted)), frozenset(), frozenset())
        arrow = _median_ms(lambda at, of: len(load_rows(at, of)), path, needs)
        line = f"{wanted:6,} documents: scan matched in Arrow {arrow:6.0f} ms"
        if wanted < _LITERALS_BELOW:
            literals = _median_ms(_literal_query, path, needs)
            line += f", SQL literals {literals:6.0f} ms ({literals / arrow:.1f}x)"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
