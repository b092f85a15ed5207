"""Sink: a snapshot of the source's documents as of T0, loaded into both tables once.

``ingest --snapshot`` reads every document in scope after T0
(:mod:`shardstream.spark.ingest.snapshot`) and loads it here before the stream starts at T0:

* the change log gets one ``read`` row per document, as Debezium's snapshot emits
  ``op: r`` records: ``fullDocument``, ``documentKey`` (``{_id}`` alone: the shard key is
  not looked up), ``db``, ``coll``, ``clusterTime`` = T0 and ``_id`` = the high-water-mark
  token at T0, the point the stream resumes from, which sorts before every event of the
  stream; so the change log replayed in ``_id`` order rebuilds the mirror;
* the mirror gets the same documents, each with that ``_id`` and ``clusterTime``.

Each table takes the snapshot in one commit, the one that creates it, with the marks of
:mod:`shardstream.spark.delta.snapshot.marks`: all of it or none of it.  The change log
goes first; the mirror is then built from the change log's ``read`` rows, so a crash
between the two commits leaves a change log that completes the mirror without the source
(:func:`complete_mirror`, which every ingest run calls before its stream starts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

import bson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from deltalake import write_deltalake

from shardstream.errors import SinkError
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.spark.delta.changelog.table import CHANGELOG_SCHEMA, CHANGELOG_TABLE
from shardstream.spark.delta.commits import committed_watermark, open_table
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.prepare import MIRROR_SCHEMA
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.snapshot.marks import SNAPSHOT_OPERATION, SnapshotMarks, snapshot_times
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.source.rows import CLUSTER_TIME_TYPE
from shardstream.transform.raw.extended_json import bson_to_json
from shardstream.transform.raw.oplog_entry import value_size

_ID_NAME: Final = b"_id"
# The change-log columns a mirror row is made of, and the row kind.
_READ_COLUMNS: Final = pa.schema(
    CHANGELOG_SCHEMA.field(name)
    for name in ("operationType", "db", "coll", "documentKey", "fullDocument", "_id", "clusterTime")
)


def read_rows(
    documents: Sequence[bytes], db: str, coll: str, *, token: str, start: Timestamp
) -> pa.RecordBatch:
    """Change-log rows (``CHANGELOG_SCHEMA``) of documents the snapshot read from ``db.coll``.

    Args:
        documents: the documents' BSON, as the source returned them.
        db / coll: their namespace.
        token / start: the snapshot's token and T0 (:class:`SnapshotMarks`).

    Raises:
        SinkError: a document without an ``_id``.
    """
    count = len(documents)
    values = {
        "_id": pa.repeat(pa.scalar(token, pa.string()), count),
        "operationType": pa.repeat(pa.scalar(SNAPSHOT_OPERATION, pa.string()), count),
        "clusterTime": pa.repeat(
            pa.scalar({"t": start.time, "i": start.inc}, CLUSTER_TIME_TYPE), count
        ),
        "db": pa.repeat(pa.scalar(db, pa.string()), count),
        "coll": pa.repeat(pa.scalar(coll, pa.string()), count),
        "documentKey": pa.array([_id_key_json(raw, db, coll) for raw in documents], pa.string()),
        "fullDocument": pa.array([bson_to_json(raw) for raw in documents], pa.string()),
    }
    columns = [values.get(field.name, pa.nulls(count, field.type)) for field in CHANGELOG_SCHEMA]
    return pa.RecordBatch.from_arrays(columns, schema=CHANGELOG_SCHEMA)


def _id_key_json(raw: bytes, db: str, coll: str) -> str:
    """``{_id: <the document's _id>}`` as canonical Extended JSON, from the bytes."""
    # The server stores _id first: size that one element rather than list every field.
    size = value_size(raw, raw[4], 9) if raw[5:9] == _ID_NAME + b"\x00" else None
    if size is not None:
        return _element_json(raw[4 : 9 + size])
    # Elsewhere, or of a type not sized there (regex, DBPointer): decoded as the oplog is.
    document = RawBSONDocument(raw, RAW_OPLOG_CODEC_OPTIONS)
    if "_id" not in document:
        raise SinkError(f"expected every document of {db}.{coll} to have an _id, got none")
    return bson_to_json(bson.encode({"_id": document["_id"]}))


def _element_json(element: bytes) -> str:
    """The one-element document holding ``element`` (type, name, value) as JSON."""
    return bson_to_json((len(element) + 5).to_bytes(4, "little") + element + b"\x00")


def check_no_tables(root: str | Path) -> None:
    """Refuse a new snapshot into a lakehouse that already has tables.

    Raises:
        SinkError: the change log or the mirror (either layout's) exists.
    """
    names = (CHANGELOG_TABLE, MIRROR_TABLE, STATE_TABLE)
    found = [name for name in names if open_table(Path(root) / name)]
    if found:
        raise SinkError(
            f"expected no tables under {root} for a new snapshot, got {', '.join(found)} "
            "without one: a snapshot starts a lakehouse (ingest without --snapshot continues "
            "these tables; delete the root to start again)"
        )


def snapshot_in_changelog(root: str | Path) -> tuple[Timestamp, Timestamp] | None:
    """(T0, read end) of the snapshot the change log holds; None when it holds none."""
    return snapshot_times(open_table(Path(root) / CHANGELOG_TABLE))


def load_changelog(
    root: str | Path, batches: Iterable[pa.RecordBatch], marks: SnapshotMarks
) -> int:
    """Create the change log with the snapshot's rows in one commit; return the row count.

    ``batches`` are streamed into the table's files, so the snapshot need not fit in memory.

    Raises:
        DeltaError: the change log exists already (:func:`check_no_tables` says so first).
    """
    return _create_with_marks(Path(root) / CHANGELOG_TABLE, CHANGELOG_SCHEMA, batches, marks)


def complete_mirror(root: str | Path, table: str = MIRROR_TABLE) -> int | None:
    """Load the change log's snapshot into the mirror if the mirror lacks it.

    Args:
        table: the mirror's table (``mirror``, or the per-collection layout's state).

    Returns:
        The rows loaded, or None when there was nothing to do (no snapshot, or the mirror
        holds it already).

    Raises:
        SinkError: the mirror exists without the snapshot, or the change log's watermark
            is not the snapshot's token (a stream wrote into it before the mirror had it).
    """
    root = Path(root)
    changelog = open_table(root / CHANGELOG_TABLE)
    times = snapshot_times(changelog)
    mirror = open_table(root / table)
    if changelog is None or times is None or snapshot_times(mirror) is not None:
        return None
    if mirror is not None:
        raise SinkError(
            f"expected the mirror under {root} to be absent or to hold the change log's "
            "snapshot, got a mirror without it (delete the root to start again)"
        )
    token = committed_watermark(changelog)
    if token is None:
        raise SinkError(f"expected the snapshot commit of {root}/changelog to carry a watermark")
    marks = SnapshotMarks(start=times[0], read_end=times[1], token=token)
    # The dataset is opened here: delta-rs calls from inside the writer's input would
    # start its runtime within the running one.
    rows = _mirror_rows(changelog.to_pyarrow_dataset())
    return _create_with_marks(root / table, MIRROR_SCHEMA, rows, marks)


def _mirror_rows(changelog: pa.dataset.Dataset) -> Iterator[pa.RecordBatch]:
    """The mirror rows of the change log's ``read`` rows."""
    for batch in changelog.to_batches(columns=list(_READ_COLUMNS.names)):
        # Cast first: compaction may have written string_view columns.
        rows = batch.cast(_READ_COLUMNS)
        rows = rows.filter(pc.equal(rows["operationType"], SNAPSHOT_OPERATION))
        ids = [document_id(key) for key in rows["documentKey"].to_pylist()]
        columns = {name: rows[name] for name in MIRROR_SCHEMA.names if name != "_documentId"}
        columns["_documentId"] = pa.array(ids, pa.string())
        yield pa.RecordBatch.from_pydict(columns, schema=MIRROR_SCHEMA)


def _create_with_marks(
    path: Path, schema: pa.Schema, batches: Iterable[pa.RecordBatch], marks: SnapshotMarks
) -> int:
    """Create the table at ``path`` from ``batches`` in one commit carrying ``marks``;
    return its row count. The batches are streamed, not held in memory."""
    rows = [0]

    def counted() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows[0] += batch.num_rows
            yield batch

    write_deltalake(
        str(path),
        pa.RecordBatchReader.from_batches(schema, counted()),
        mode="error",
        commit_properties=marks.properties(),
    )
    return rows[0]
