"""Hypothesis strategies for BSON values and resume token data."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from bson.binary import Binary
from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from hypothesis import strategies as st

from shardstream.resume_token import UNDEFINED, DBPointer, ResumeTokenData, Symbol, TokenType
from shardstream.resume_token.token_json import dumps

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1).map(Int64)
DOUBLES = st.floats(allow_nan=True, allow_infinity=True)
FINITE_DOUBLES = st.floats(allow_nan=False, allow_infinity=False)
DECIMALS = st.one_of(
    st.builds(
        lambda sign, coefficient, exponent: Decimal128(f"{sign}{coefficient}E{exponent}"),
        st.sampled_from(["", "-"]),
        st.one_of(st.integers(0, 10**6), st.integers(0, 10**34 - 1)),
        st.one_of(st.integers(-20, 20), st.integers(-6176, 6111)),
    ),
    st.sampled_from(
        ["1.5", "0.1", "-2.50", "1E+30", "NaN", "Infinity", "-Infinity", "0E-6176"]
    ).map(Decimal128),
)
TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)
NAMES = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8)
UUIDS = st.uuids()
OBJECT_IDS = st.binary(min_size=12, max_size=12).map(ObjectId)
TIMESTAMPS = st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))

# The scalar types pymongo's bson encodes and decodes as themselves.
DRIVER_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    INT32,
    INT64,
    DOUBLES,
    DECIMALS,
    TEXT,
    OBJECT_IDS,
    st.builds(Binary, st.binary(max_size=300), st.sampled_from([0, 1, 3, 4, 5, 0x80])),
    TIMESTAMPS,
    st.integers(-(2**63), 2**63 - 1).map(DatetimeMS),
    st.builds(Regex, NAMES, st.sampled_from(["", "i", "im", "imsx"])),
    TEXT.map(lambda text: Code(text)),
    st.sampled_from([MinKey(), MaxKey()]),
)
# Every scalar type, the deprecated ones shardstream models itself included.
SCALARS: st.SearchStrategy[Any] = st.one_of(
    DRIVER_SCALARS,
    TEXT.map(lambda text: Symbol(text)),
    st.just(UNDEFINED),
    st.builds(DBPointer, NAMES, OBJECT_IDS),
)


def bson_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any BSON value, nested documents and arrays included."""
    return st.recursive(
        SCALARS,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(NAMES, children, max_size=4),
            st.builds(
                lambda text, scope: Code(text, scope),
                TEXT,
                st.dictionaries(NAMES, children, max_size=3),
            ),
        ),
        max_leaves=max_leaves,
    )


# The values the compiled Extended JSON readers take themselves (resume_token/_json_*.c):
# numbers, strings (any character), ids, dates of datetime's years at millisecond precision,
# and documents (no "$" name) and arrays of them.
COMMON_JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        INT32,
        INT64,
        st.floats(),
        TEXT,
        OBJECT_IDS,
        st.datetimes(datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31)).map(
            lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000)
        ),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(NAMES.filter(lambda name: name[:1] != "$"), children, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def altered_canonical_texts(draw: st.DrawFn) -> str:
    """A document's canonical text (``{"v": <a common value>}``) with a few characters cut
    or one inserted at a random place: text the compiled readers must refuse or read as
    their references do."""
    text = dumps({"v": draw(COMMON_JSON_VALUES)})
    at = draw(st.integers(0, len(text)))
    inserted = draw(
        st.sampled_from(["", " ", "\\", '"', "{", "]", ",", "\x01", "\\ud800", '"$x": 1, '])
    )
    return text[:at] + inserted + text[at + draw(st.integers(0, 2)) :]


def document_keys() -> st.SearchStrategy[dict[str, Any]]:
    """A documentKey: ``_id`` of any type, sometimes after shard-key fields."""
    return st.builds(
        lambda shard_fields, id_value: {**shard_fields, "_id": id_value},
        st.dictionaries(NAMES.filter(lambda n: n != "_id"), bson_values(4), max_size=2),
        bson_values(),
    )


@st.composite
def token_data(draw: st.DrawFn) -> ResumeTokenData:
    """Valid token data of any version, event or high-water mark."""
    version = draw(st.sampled_from([0, 1, 2]))
    time = draw(TIMESTAMPS)
    if draw(st.booleans()) and version >= 1:
        return ResumeTokenData(
            cluster_time=time, version=version, token_type=TokenType.HIGH_WATER_MARK
        )
    uuid_value: uuid.UUID | None = draw(st.one_of(st.none(), UUIDS))
    key = draw(document_keys())
    fields: dict[str, Any] = {
        "cluster_time": time,
        "version": version,
        "txn_op_index": draw(st.integers(0, 2**31 - 1)),
        "from_invalidate": draw(st.booleans()) if version >= 1 else False,
        "uuid": uuid_value,
    }
    if version >= 2:
        op_type = draw(st.sampled_from(["insert", "update", "replace", "delete"]))
        fields["event_identifier"] = {"operationType": op_type, "documentKey": key}
        fields["fragment_num"] = draw(st.one_of(st.none(), st.integers(0, 2**31 - 1)))
    elif uuid_value is not None and draw(st.booleans()):
        fields["document_key"] = key
    return ResumeTokenData(**fields)
