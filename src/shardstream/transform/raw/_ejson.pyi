from typing import Any

# The compiled half of extended_json (see _ejson.c): None where the Python walker must write.
def dumps(raw: bytes | bytearray | memoryview, relaxed: bool, /) -> str | None: ...

# A change event's row fields (see _event_fields.c): None where the Python reader must read.
def event_fields(
    raw: bytes | bytearray | memoryview, relaxed: bool, /
) -> tuple[Any, ...] | None: ...

# Many events' row fields as Arrow buffers (see _event_columns.c): (per column (validity,
# offsets, data) or (validity, data), the rows left to the caller, null in every column).
def event_columns(
    raws: list[bytes | None], relaxed: bool, /
) -> tuple[tuple[tuple[bytes | None, ...], ...], list[int]]: ...

# An event's BSON without the named top-level fields, and those fields as (type byte, value
# bytes) or None (see _event_split.c): None where the Python walk must cut.
def split_fields(
    raw: bytes | bytearray | memoryview, names: tuple[str, ...], /
) -> tuple[bytes, tuple[tuple[int, bytes] | None, ...]] | None: ...

# Whether an oplog entry's bytes may be copied as they are (see _bson_check.c, bson_check.py).
def valid_entry(raw: bytes | bytearray | memoryview, max_nesting: int = 200, /) -> bool: ...
