"""Typed columns' values: whether a column holds a value, and the value it holds.

:func:`column_value` converts one value to what a column of a
:mod:`shardstream.spark.delta.typed.column_types` type holds (``column_types.fits`` says whether it
can); :func:`fitter` and :func:`converter` are the check and the conversion built once per
column, which is what a table's rows go through (per value, an Arrow type's
hash or inspection cost more than the check itself).  :func:`relaxed_json` writes the values
no column holds (``_rescued``) and JSON columns.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from bson import json_util
from bson.binary import Binary

from shardstream.resume_token.token_json import to_json_ready
from shardstream.spark.delta.typed.column_types import (
    DOUBLE,
    HELD,
    INT32,
    INT32_MAX,
    INT32_MIN,
    INT64,
    RELAXED,
    STRING,
    STRING_LIST,
    fits,
    is_document,
    value_type,
)


def column_value(value: Any, kind: pa.DataType | str) -> Any:
    """``value`` as a column of type ``kind`` holds it (``kind`` must be one it
    :func:`fits`)."""
    if value is None:
        return None
    if isinstance(kind, str):  # JSON_COLUMN
        return relaxed_json(value)
    cls = type(value)
    if (cls is str and kind == STRING) or (cls is float and kind == DOUBLE):
        return value
    if cls is int and kind in (INT32, INT64):
        return value
    if cls is list and value and kind == STRING_LIST and set(map(type, value)) == {str}:
        return value
    if pa.types.is_struct(kind):
        return {field.name: column_value(value.get(field.name), field.type) for field in kind}
    if pa.types.is_list(kind):
        return [column_value(element, kind.value_type) for element in value]
    if pa.types.is_string(kind):
        if isinstance(value, Binary):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(value)
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_binary(kind):
        return bytes(value)
    if pa.types.is_timestamp(kind):
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    return value


def relaxed_json(value: Any) -> str:
    """Relaxed Extended JSON of ``value`` (``_rescued``, JSON columns, a mixed ``_id``).

    Symbol, Undefined and DBPointer (as the state's Extended JSON decodes them) are written
    as their wrappers: json_util cannot write shardstream's own types.
    """
    return json_util.dumps(to_json_ready(value), json_options=RELAXED)


Fitter = Callable[[Any], bool]
Converter = Callable[[Any], Any]


def fitter(kind: pa.DataType | str) -> Fitter:
    """:func:`fits` for one column type, built once: a column's values are checked without
    hashing or inspecting its Arrow type again for each of them."""
    if isinstance(kind, str):  # JSON_COLUMN
        return lambda _: True
    held = HELD.get(kind)
    if held is not None:
        is_int32 = kind == INT32

        def check_scalar(value: Any) -> bool:
            if value is None:
                return True
            if type(value) in held:
                return not is_int32 or INT32_MIN <= value <= INT32_MAX
            return fits(value, kind)  # a subclass, a Binary UUID ...: the general way

        return check_scalar
    if pa.types.is_list(kind):
        element = fitter(kind.value_type)
        return lambda value: value is None or (type(value) is list and all(map(element, value)))
    if pa.types.is_struct(kind):
        children = {field.name: fitter(field.type) for field in kind}

        def check_document(value: Any) -> bool:
            if value is None:
                return True
            if not is_document(value):
                return False
            for name, child in value.items():
                check = children.get(name)
                if check is None:
                    if value_type(child) is not None:
                        return False
                elif not check(child):
                    return False
            return True

        return check_document
    return lambda value: fits(value, kind)


def converter(kind: pa.DataType | str) -> Converter:
    """:func:`column_value` for one column type, built once (see :func:`fitter`)."""
    if isinstance(kind, str):  # JSON_COLUMN
        return lambda value: None if value is None else relaxed_json(value)
    if pa.types.is_list(kind):
        element = converter(kind.value_type)
        return lambda value: None if value is None else [element(item) for item in value]
    if pa.types.is_struct(kind):
        children = [(field.name, converter(field.type)) for field in kind]
        return lambda value: (
            None
            if value is None
            else {name: convert(value.get(name)) for name, convert in children}
        )
    plain = {STRING: str, INT32: int, INT64: int, DOUBLE: float}.get(kind)
    if plain is not None:
        # Values of exactly that class are already what the column holds.
        return lambda value: (
            value if type(value) is plain or value is None else column_value(value, kind)
        )
    return lambda value: column_value(value, kind)
