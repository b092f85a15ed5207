"""A change event as a flat row users can query without parsing BSON.

One column per top-level event field a lakehouse query needs.  Documents become
Extended JSON strings (canonical by default, so every BSON type round-trips;
relaxed on request); ``_id`` is the token's ``_data`` hex, which sorts in stream
order because KeyString bytes do and upper-case hex keeps byte order; ``_idTypeBits`` is the
token's ``_typeBits`` bytes as hex when it has any (a documentKey holding a long, double or
decimal), so ``{_data: _id, _typeBits: _idTypeBits}`` resumes a native change stream.  Two
internal columns ride along for the sinks and are not part of the public schema:
``_oplogUpdate`` (the oplog's own ``$v:2`` diff of an update, as its BSON bytes: the mirror
decodes it in C instead of parsing JSON, and ``updateDescription`` alone cannot replay dotted
or numeric field names) and ``_fragment`` (the whole
event's operationType, for a fragment of a split event).

pyarrow only (no pyspark): the rows are built on executors and in unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
from bson import json_util
from bson.json_util import JSONOptions
from bson.timestamp import Timestamp

from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.resume_token.bson_values import millis_to_date
from shardstream.resume_token.token_json import JSON_OPTIONS as CANONICAL
from shardstream.spark.source.encoded_rows import (
    DOCUMENT_COLUMNS,
    encoded_event_values,
    millis,
    token_columns,
)
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.raw.event_writer import encode_event_document
from shardstream.transform.raw.extended_json import bson_to_json

RELAXED: Final = json_util.RELAXED_JSON_OPTIONS.with_options(
    datetime_conversion=CANONICAL.datetime_conversion
)

CLUSTER_TIME_TYPE: Final = pa.struct([("t", pa.int64()), ("i", pa.int64())])

EVENT_SCHEMA: Final = pa.schema(
    [
        pa.field("_id", pa.string(), nullable=False),
        pa.field("_idTypeBits", pa.string()),
        pa.field("operationType", pa.string(), nullable=False),
        pa.field("clusterTime", CLUSTER_TIME_TYPE, nullable=False),
        pa.field("wallTime", pa.timestamp("us", tz="UTC")),
        pa.field("db", pa.string()),
        pa.field("coll", pa.string()),
        pa.field("collectionUUID", pa.string()),
        *(pa.field(name, pa.string()) for name in DOCUMENT_COLUMNS),
        pa.field("txnNumber", pa.int64()),
        pa.field("lsid", pa.string()),
        pa.field("shard", pa.string()),
        pa.field("_oplogUpdate", pa.binary()),
        pa.field("_fragment", pa.string()),
    ]
)
"""The Arrow schema of every batch ``read()`` yields (internal columns last)."""

PUBLIC_COLUMNS: Final = tuple(
    field.name for field in EVENT_SCHEMA if field.name not in ("_oplogUpdate", "_fragment")
)

_SPARK_TYPES: Final = {
    pa.string(): "string",
    pa.binary(): "binary",
    pa.int64(): "bigint",
    pa.timestamp("us", tz="UTC"): "timestamp",
    CLUSTER_TIME_TYPE: "struct<t: bigint, i: bigint>",
}

SPARK_DDL: Final = ", ".join(
    f"`{field.name}` {_SPARK_TYPES[field.type]}" + ("" if field.nullable else " not null")
    for field in EVENT_SCHEMA
)
"""The same schema as a Spark DDL string (what ``DataSource.schema()`` returns)."""


VALUE_NAMES: Final = (
    "_id",
    "_idTypeBits",
    "operationType",
    "clusterTime.t",
    "clusterTime.i",
    "wallTime",  # ms since the epoch
    "db",
    "coll",
    "collectionUUID",
    *DOCUMENT_COLUMNS,
    "txnNumber",
    "lsid",
    "shard",
    "_oplogUpdate",
    "_fragment",
)
"""What :func:`event_values` returns, in order: :data:`EVENT_SCHEMA`'s columns with
``clusterTime`` split in two and ``wallTime`` as ms (a tuple per event, transposed into
columns, costs a fraction of a dict per event)."""

_AT: Final = {name: index for index, name in enumerate(VALUE_NAMES)}
_WALL_TIME_TYPE: Final = EVENT_SCHEMA.field("wallTime").type


def event_values(event: ChangeEvent, *, relaxed: bool = False) -> tuple[Any, ...]:
    """One event's row as a tuple in :data:`VALUE_NAMES` order."""
    if isinstance(event, EncodedEvent):
        return encoded_event_values(event, relaxed=relaxed)  # the same values, from the bytes
    document = event.document
    options = RELAXED if relaxed else CANONICAL
    cluster_time: Timestamp = document.get("clusterTime") or event.token_data.cluster_time
    ns = document.get("ns")
    uuid = document.get("collectionUUID")
    txn_number = document.get("txnNumber")
    raw_update = event.raw_update
    return (
        *token_columns(event),
        event.operation_type,
        cluster_time.time,
        cluster_time.inc,
        millis(document.get("wallTime")),
        ns.get("db") if isinstance(ns, Mapping) else None,
        ns.get("coll") if isinstance(ns, Mapping) else None,
        str(uuid) if uuid is not None else None,
        *(_json(document.get(name), options) for name in DOCUMENT_COLUMNS),
        int(txn_number) if txn_number is not None else None,
        _json(document.get("lsid"), options),
        event.shard,
        encode_event_document(raw_update) if isinstance(raw_update, Mapping) else None,
        event.fragment_of,
    )


def event_to_row(event: ChangeEvent, *, relaxed: bool = False) -> dict[str, Any]:
    """One event as a dict keyed by :data:`EVENT_SCHEMA` column names (Python values)."""
    values = event_values(event, relaxed=relaxed)
    row = dict(zip(VALUE_NAMES, values, strict=True))
    row["clusterTime"] = {"t": row.pop("clusterTime.t"), "i": row.pop("clusterTime.i")}
    wall_ms = values[_AT["wallTime"]]
    row["wallTime"] = None if wall_ms is None else millis_to_date(wall_ms)
    return {field.name: row[field.name] for field in EVENT_SCHEMA}


def rows_to_batch(rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    """:func:`event_values` tuples as one Arrow record batch of :data:`EVENT_SCHEMA`."""
    values = list(zip(*rows, strict=True)) if rows else [()] * len(VALUE_NAMES)
    columns: list[pa.Array] = []
    for field in EVENT_SCHEMA:
        name = field.name
        if name == "clusterTime":
            times = [pa.array(values[_AT[f"clusterTime.{part}"]], pa.int64()) for part in "ti"]
            columns.append(pa.StructArray.from_arrays(times, fields=list(CLUSTER_TIME_TYPE)))
        elif name == "wallTime":
            ms = pa.array(values[_AT[name]], pa.timestamp("ms", tz="UTC"))
            columns.append(ms.cast(_WALL_TIME_TYPE))
        else:
            columns.append(pa.array(values[_AT[name]], type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=EVENT_SCHEMA)


def _json(value: Any, options: JSONOptions) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        # A document (the common case): its BSON through the raw writer, the text
        # json_util writes for it (a FieldList's repeated names kept), ~10x faster.
        return bson_to_json(encode_event_document(value), relaxed=options is RELAXED)
    return json_util.dumps(value, json_options=options)
