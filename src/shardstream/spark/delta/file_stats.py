"""Delta statistics of a data file written outside delta-rs: what lets a reader skip it.

A commit's add action carries the file's ``numRecords`` and, per column, ``nullCount``,
``minValues`` and ``maxValues`` (the Delta protocol's per-file statistics); a reader skips a
file whose bounds exclude its predicate, so a bound must hold every value of the file.
Bounds are written for the top-level columns whose bounds are exact here: integers, finite
doubles, strings of at most :data:`MAX_STRING` characters (longer bounds, a document's text,
would swell the log; a column readers prune by, such as the change log's token, is named by
``keys`` and bounded whatever its length) and zoned timestamps of whole milliseconds (the
BSON dates the typed tables hold, the change log's ``wallTime``); any other column gets its
null count alone, and is read whatever the predicate, as a column without statistics is.
Every file shardstream writes outside delta-rs gets its statistics here: the tasks' change
log files, the bucketed state's and mirror's buckets, the history's files.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Collection
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

MAX_STRING: Final = 64


def file_statistics(rows: pa.Table, *, keys: Collection[str] = ()) -> str:
    """The statistics JSON of a file holding ``rows`` (partition columns excluded).

    ``keys`` names string columns whose bounds are written whatever their length: the
    columns readers prune by, whose values are few per file and short enough for the log
    (the change log's token ``_id``, ~140 characters).
    """
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field in rows.schema:
        if pa.types.is_nested(field.type):
            continue
        column = rows[field.name]
        nulls[field.name] = column.null_count
        bounds = _bounds(column, field.type, longest=None if field.name in keys else MAX_STRING)
        if bounds is not None:
            low[field.name], high[field.name] = bounds
    return json.dumps(
        {"numRecords": rows.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls}
    )


def _bounds(
    column: pa.ChunkedArray, kind: pa.DataType, *, longest: int | None
) -> tuple[Any, Any] | None:
    """The column's exact (min, max) as the statistics write them, or None (a string
    bound longer than ``longest`` characters: None)."""
    if column.null_count == len(column):
        return None
    if pa.types.is_floating(kind):
        if not pc.all(pc.is_finite(column)).as_py():  # NaN and infinities: no JSON number
            return None
    elif not (pa.types.is_integer(kind) or pa.types.is_string(kind) or _utc_micros(kind)):
        return None
    found = pc.min_max(column)
    low, high = found["min"], found["max"]
    if pa.types.is_timestamp(kind):
        return _millisecond_bounds(low, high)
    low_value, high_value = low.as_py(), high.as_py()
    if (
        pa.types.is_string(kind)
        and longest is not None
        and max(len(low_value), len(high_value)) > longest
    ):
        return None
    return low_value, high_value


def _utc_micros(kind: pa.DataType) -> bool:
    """A timestamp with a zone, to the microsecond at most (``as_py`` gives a datetime)."""
    return pa.types.is_timestamp(kind) and kind.tz is not None and kind.unit != "ns"


def _millisecond_bounds(low: pa.Scalar, high: pa.Scalar) -> tuple[str, str] | None:
    """Timestamp bounds as the protocol's ISO-8601 text, when both are whole milliseconds
    of datetime's years (else a bound written to the millisecond might not hold)."""
    try:
        values = (low.as_py(), high.as_py())
    except (ValueError, OverflowError):
        return None
    if any(not isinstance(v, datetime.datetime) or v.microsecond % 1000 for v in values):
        return None
    first, last = (
        v.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
        for v in values
    )
    return first, last
