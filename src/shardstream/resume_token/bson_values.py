"""BSON types that pymongo folds into others, kept distinct so tokens round-trip.

pymongo decodes Symbol as ``str``, Undefined as ``None`` and DBPointer as
``DBRef``; KeyString keeps them apart (a Symbol sets a type bit, Undefined and
DBPointer have CTypes of their own), so the codec needs values that say which
BSON type they were.
"""

from __future__ import annotations

import calendar
import datetime
from dataclasses import dataclass
from typing import Final

from bson.datetime_ms import DatetimeMS
from bson.objectid import ObjectId


class Symbol(str):
    """A BSON Symbol (deprecated type 0x0E): compares and sorts like the string it holds."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class _UndefinedType:
    """The BSON Undefined value (deprecated type 0x06); use the ``UNDEFINED`` singleton."""

    __slots__ = ()
    _instance: _UndefinedType | None = None

    def __new__(cls) -> _UndefinedType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __reduce__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Final = _UndefinedType()


@dataclass(frozen=True, slots=True)
class DBPointer:
    """A BSON DBPointer (deprecated type 0x0C): a namespace string and an ObjectId."""

    namespace: str
    oid: ObjectId


_EPOCH_UTC: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_NAIVE: Final = datetime.datetime(1970, 1, 1)


def date_millis(value: datetime.datetime | DatetimeMS) -> int:
    """A BSON date's milliseconds since the epoch, as pymongo encodes the value (a naive
    datetime is UTC; sub-millisecond digits are dropped toward the past)."""
    if isinstance(value, DatetimeMS):
        return int(value)
    offset = value.utcoffset()
    if offset is not None:
        value = value - offset
    return calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000


def millis_to_date(millis: int, *, aware: bool = True) -> datetime.datetime | DatetimeMS:
    """A BSON date as pymongo decodes it with ``DATETIME_AUTO``: a UTC datetime (naive
    unless ``aware``), or the exact milliseconds outside datetime's years 1..9999."""
    try:
        return (_EPOCH_UTC if aware else _EPOCH_NAIVE) + datetime.timedelta(milliseconds=millis)
    except OverflowError:
        return DatetimeMS(int(millis))  # an Int64 inside warns when it is encoded
