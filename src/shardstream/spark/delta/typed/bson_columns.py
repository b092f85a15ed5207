"""A collection's typed columns read from its documents' BSON in C, where that is certain.

:class:`~shardstream.spark.delta.typed.rows.ColumnSet` checks and projects documents a column
at a time over their Python values; a batch is tens of thousands of documents whose values
nearly always fit their columns as they are.  The compiled reader (``_bson_columns.c``) reads
the documents' BSON (the ``_doc`` bytes the batch encodes anyway) into the columns' Arrow
buffers, and says which rows hold a field no column names.  It builds a column only when
every value is of a BSON type whose Python value the column holds by ``column_types``' rules,
converted as ``column_values`` converts it; any other column it leaves to the Python path,
which decides it value by value.  So a built column is exactly what the Python path would
have made, with no misfit to rescue (``tests/spark/test_bson_columns.py``), and where the
module is missing (no C compiler) everything takes the Python path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

import pyarrow as pa

from shardstream.spark.delta.typed.column_arrays import arrow_type
from shardstream.spark.delta.typed.column_types import DOUBLE, INT32, INT64, STRING, TIMESTAMP

try:  # setup.py builds it; optional, as a C compiler may be missing
    from shardstream.spark.delta.typed._bson_columns import bson_columns as _bson_columns
except ImportError:  # pragma: no cover - tests/spark/test_bson_columns.py fails instead
    _bson_columns = None  # type: ignore[assignment]

ColumnType: TypeAlias = "pa.DataType | str"  # an Arrow type or column_types.JSON_COLUMN
Spec: TypeAlias = tuple[int, Any]

# The column kinds of _bson_columns.c (K_PYTHON: a column it leaves to the Python path).
K_PYTHON, K_INT32, K_INT64, K_DOUBLE, K_BOOL, K_STRING, K_TIMESTAMP, K_BINARY = range(8)
K_STRUCT, K_LIST = 8, 9
_SCALARS: Final[dict[pa.DataType, int]] = {
    INT32: K_INT32,
    INT64: K_INT64,
    DOUBLE: K_DOUBLE,
    pa.bool_(): K_BOOL,
    STRING: K_STRING,
    TIMESTAMP: K_TIMESTAMP,
    pa.binary(): K_BINARY,
}


@dataclasses.dataclass(frozen=True, slots=True)
class BuiltColumns:
    """What the compiled reader made of a batch's documents under some columns.

    Attributes:
        kinds: the columns it read them under (name -> type, ``_id`` first).
        arrays: the columns it built: every value fits, each as the Python path holds it.
        unknown: the rows holding a non-null field that no column names, in order.
    """

    kinds: tuple[tuple[str, ColumnType], ...]
    arrays: Mapping[str, pa.Array]
    unknown: Sequence[int]


def available() -> bool:
    """Whether the compiled reader was built."""
    return _bson_columns is not None


def built_columns(
    raws: list[bytes | None], kinds: tuple[tuple[str, ColumnType], ...]
) -> BuiltColumns | None:
    """The columns ``kinds`` of the documents ``raws`` (their BSON; None: a row null in every
    column) that the compiled reader builds, or None where it reads none (not built, or an
    item that is no BSON document: the Python path judges it)."""
    if _bson_columns is None:
        return None
    plan = tuple((name.encode(), spec(kind)) for name, kind in kinds)
    found = _bson_columns(raws, plan)
    if found is None:
        return None
    parts, unknown = found
    arrays = {
        name: _array(arrow_type(kind), part)
        for (name, kind), part in zip(kinds, parts, strict=True)
        if part is not None
    }
    return BuiltColumns(kinds, arrays, unknown)


def spec(kind: ColumnType) -> Spec:
    """A column type as the compiled reader's plan names it."""
    if isinstance(kind, str):  # a JSON column: relaxed Extended JSON, written in Python
        return (K_PYTHON, None)
    code = _SCALARS.get(kind)
    if code is not None:
        return (code, None)
    if pa.types.is_struct(kind):
        return (K_STRUCT, tuple((field.name.encode(), spec(field.type)) for field in kind))
    if pa.types.is_list(kind):
        return (K_LIST, spec(kind.value_type))
    return (K_PYTHON, None)


def _array(kind: pa.DataType, part: tuple[Any, ...]) -> pa.Array:
    """An Arrow array of type ``kind`` from the parts the compiled reader returned."""
    length, nulls, validity, buffers, children = part
    child_types: list[pa.DataType] = []
    if pa.types.is_struct(kind):
        child_types = [field.type for field in kind]
    elif pa.types.is_list(kind):
        child_types = [kind.value_type]
    return pa.Array.from_buffers(
        kind,
        length,
        [None if validity is None else pa.py_buffer(validity), *map(pa.py_buffer, buffers)],
        null_count=nulls,
        children=[_array(t, c) for t, c in zip(child_types, children, strict=True)] or None,
    )
