"""What ``make demo`` prints of the per-collection tables: typed rows, a history, a change feed.

Read with deltalake and pyarrow as a user would (docs/lakehouse.md shows the same queries in Polars,
DuckDB and Spark SQL); nothing here is needed by the ingest itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, TextIO

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from shardstream.spark.delta.commits import table_rows
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    table_path,
)

SHOWN_ROWS: Final = 2
_HIDDEN: Final = ("_doc", "_token", "_clusterTime", "_documentId")
_WIDTH: Final = 150


def show_collections(out: TextIO, root: Path) -> None:
    """Each collection's typed mirror (schema and first rows), then one document's
    history and the change feed of the busiest collection's last version."""
    busiest: tuple[int, tuple[str, str]] | None = None
    for db, coll in collections_of(root, MIRROR_DIR):
        table = DeltaTable(str(table_path(root, MIRROR_DIR, db, coll)))
        rows = table_rows(table)
        columns = [name for name in rows.column_names if name not in _HIDDEN]
        out.write(f"\n{table_path(root, MIRROR_DIR, db, coll)}: {rows.num_rows} documents\n")
        out.write("  " + ", ".join(f"{n} {rows.schema.field(n).type}" for n in columns)[:_WIDTH])
        out.write("\n")
        for row in rows.sort_by("_documentId").select(columns).slice(0, SHOWN_ROWS).to_pylist():
            out.write(f"  {_text(row)}\n")
        if busiest is None or table.version() > busiest[0]:
            busiest = (table.version(), (db, coll))
    if busiest is None:
        return
    _show_history(out, root, *busiest[1])
    _show_change_feed(out, root, *busiest[1])


def _show_history(out: TextIO, root: Path, db: str, coll: str) -> None:
    path = table_path(root, HISTORY_DIR, db, coll)
    if not (path / "_delta_log").is_dir():
        return
    history = table_rows(DeltaTable(str(path)))
    ids = history["_documentId"]
    counts = pc.value_counts(ids).to_pylist()
    chosen = max(counts, key=lambda item: (item["counts"], item["values"]))["values"]
    versions = history.filter(pc.equal(ids, chosen)).sort_by("__START_AT")
    out.write(f"\n{path}: {versions.num_rows} versions of _id {chosen}\n")
    for row in versions.to_pylist():
        start, end = row["__START_AT"], row["__END_AT"]
        hidden = (*_HIDDEN, "__START_AT", "__END_AT", "_current")
        shown = {k: v for k, v in row.items() if k not in hidden}
        out.write(f"  {row['_op']:<7} {start[:18]}.. -> {(end or 'open')[:18]:<18} ")
        out.write(f"{_text(shown)[:100]}\n")


def _show_change_feed(out: TextIO, root: Path, db: str, coll: str) -> None:
    table = DeltaTable(str(table_path(root, MIRROR_DIR, db, coll)))
    version = table.version()
    feed = pa.table(table.load_cdf(starting_version=version).read_all())
    kinds = pc.value_counts(feed["_change_type"]).to_pylist()
    summary = ", ".join(f"{item['values']} {item['counts']}" for item in kinds)
    out.write(f"\nchange data feed of {db}.{coll}, version {version}: {summary}\n")


def _text(row: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in row.items() if value is not None)[
        :_WIDTH
    ]
