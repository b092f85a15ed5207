"""Sinks: what every shardstream commit to a Delta table carries, and reading it back.

Each table commits a batch together with two markers, atomically in one Delta commit:

* a Delta app transaction (``txn`` action) ``<app>:<table>`` at version = the Spark batch
  id, so a batch Spark replays after a crash is recognised and skipped;
* commit metadata ``shardstream.watermark`` = the ``_id`` token of the batch's last event,
  so the table itself says how far the stream reached when the checkpoint is gone.

The app id comes from the Spark checkpoint (its query id), so a new checkpoint is a new
app: its batch ids start again at 0 and must not be compared with the old ones.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq
from bson.timestamp import Timestamp
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype

WATERMARK_KEY: Final = "shardstream.watermark"
APP_KEY: Final = "shardstream.appId"
BATCH_KEY: Final = "shardstream.batchId"

# History is read backwards in pages; maintenance commits (optimize, vacuum) carry no
# watermark, so the newest commit that has one may be a few versions back.
_HISTORY_PAGE: Final = 20


@dataclasses.dataclass(frozen=True, slots=True)
class StoredFile:
    """A data file the table's log names: its path relative to the table, and its size."""

    path: str
    size: int


def write_data_file(table: Path, directory: str, rows: pa.Table) -> StoredFile:
    """``rows`` as a new Parquet file of the Delta table at ``table``, under its partition
    ``directory`` (``""``: none), snappy-compressed as delta-rs writes; a name no other
    writer takes (a random UUID). No reader sees it until a commit adds it."""
    relative = f"{directory}/" if directory else ""
    relative += f"part-{uuid.uuid4().hex}.snappy.parquet"
    target = table / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, target, compression="snappy")
    return StoredFile(relative, target.stat().st_size)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BatchCommit:
    """The markers one table commits with one batch.

    Attributes:
        app_id: the ingest's app id (from the checkpoint); the table adds its own suffix.
        batch_id: the Spark micro-batch id.
        watermark: the ``_id`` token of the last event of the batch.
    """

    app_id: str
    batch_id: int
    watermark: str

    def properties(
        self, table: str, previous: str | None, counts: Mapping[str, int] | None = None
    ) -> CommitProperties:
        """Commit properties: the table's app transaction plus the watermark metadata.

        Args:
            table: the table's name (suffix of its app id).
            previous: the table's watermark before this batch.  A table's watermark never
                goes back: after a lost checkpoint a new stream replays from the lower of
                the two tables' watermarks, below the other table's.
            counts: more metadata, what the batch did (read back by
                :func:`batch_metadata`: the driver that commits tasks' files never saw
                their rows).
        """
        return CommitProperties(
            app_transactions=[Transaction(transaction_app_id(self.app_id, table), self.batch_id)],
            custom_metadata={
                WATERMARK_KEY: self.advanced(previous),
                APP_KEY: self.app_id,
                BATCH_KEY: str(self.batch_id),
                **{key: str(count) for key, count in (counts or {}).items()},
            },
        )

    def advanced(self, previous: str | None) -> str:
        """The table's watermark after this batch."""
        return self.watermark if previous is None else max(previous, self.watermark)


def transaction_app_id(app_id: str, table: str) -> str:
    """The Delta app id a table commits under, e.g. ``shardstream:<query id>:mirror``."""
    return f"{app_id}:{table}"


def open_table(path: str | Path) -> DeltaTable | None:
    """The Delta table at ``path``, or None when there is none yet."""
    if not DeltaTable.is_deltatable(str(path)):
        return None
    return DeltaTable(str(path))


class OpenTables:
    """The driver's tables, each opened once and brought up to date before each use.

    Opening a table replays its log since the last checkpoint (~25 ms at 60 commits); a
    table already open reads only the commits since (~3 ms). A table not created yet is
    looked for again at each use.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._open: dict[str, DeltaTable] = {}

    def __getitem__(self, name: str) -> DeltaTable | None:
        table = self._open.get(name)
        if table is not None:
            table.update_incremental()
            return table
        table = open_table(self._root / name)
        if table is not None:
            self._open[name] = table
        return table


def already_committed(table: DeltaTable | None, commit: BatchCommit, name: str) -> bool:
    """Whether ``table`` already holds this batch (a replay after a crash)."""
    if table is None:
        return False
    version = table.transaction_version(transaction_app_id(commit.app_id, name))
    return version is not None and version >= commit.batch_id


def batch_metadata(table: DeltaTable | None, app_id: str, batch_id: int) -> dict[str, Any] | None:
    """The metadata of the batch's commit to ``table`` when it is the table's newest (None:
    no table, or the batch committed nothing there)."""
    if table is None:
        return None
    newest: dict[str, Any] = table.history(1)[0]
    if newest.get(APP_KEY) != app_id or newest.get(BATCH_KEY) != str(batch_id):
        return None
    return newest


def committed_watermark(table: DeltaTable | None) -> str | None:
    """The watermark of the newest commit that has one (None: no shardstream batch yet).

    Complexity: O(commits since that one); usually the newest commit has it.
    """
    if table is None:
        return None
    newest = table.version()
    seen = 0
    while seen <= newest:
        seen = min(seen + _HISTORY_PAGE, newest + 1)
        for commit in table.history(seen):  # newest first
            watermark = _metadata(commit, WATERMARK_KEY)
            if watermark is not None:
                return watermark
    return None


def _metadata(commit: dict[str, Any], key: str) -> str | None:
    value = commit.get(key)
    return value if isinstance(value, str) else None


def watermark_cluster_time(watermark: str) -> Timestamp:
    """The cluster time a watermark (a token's ``_data`` hex) starts with.

    Read from the KeyString's leading Timestamp alone: decoding the whole token can need
    its ``_typeBits`` (an Int64 or double in the documentKey), which the tables do not keep.

    >>> watermark_cluster_time("826553F1000000000704")
    Timestamp(1700000000, 7)
    """
    try:
        if int(watermark[:2], 16) == ctype.TIMESTAMP and len(watermark) >= 18:
            return Timestamp(int(watermark[2:10], 16), int(watermark[10:18], 16))
    except ValueError:
        pass
    raise ResumeTokenError(
        f"expected a resume token's _data hex starting with a cluster time, got {watermark!r:.80}"
    )


def table_rows(table: DeltaTable, columns: Sequence[str] | None = None) -> pa.Table:
    """Every row of ``table`` (only ``columns`` if given), typed as its schema says.

    Read through delta-rs's own engine (``QueryBuilder``), not ``to_pyarrow_table``: that goes
    through pyarrow's dataset threads calling back into a Python file system, and measured
    here one process in eight then aborted at exit ("terminate called without an active
    exception", SIGABRT), failing a command that had finished its work.
    """
    schema = pa.schema(table.schema().to_arrow())
    if columns is not None:
        schema = pa.schema([schema.field(name) for name in columns])
    selected = ", ".join(f'"{name}"' for name in schema.names)
    query = QueryBuilder().register("t", table).execute(f"SELECT {selected} FROM t")
    batches = [pa.record_batch(batch).cast(schema) for batch in query]
    return pa.Table.from_batches(batches, schema)
