from typing import Any

# The compiled half of extended_json (see _ejson.c): None where the Python walker must write.
def dumps(raw: bytes | bytearray | memoryview, relaxed: bool, /) -> str | None: ...

# A change event's row fields (see _event_fields.c): None where the Python reader must read.
def event_fields(
    raw: bytes | bytearray | memoryview, relaxed: bool, /
) -> tuple[Any, ...] | None: ...

# Whether an oplog entry's bytes may be copied as they are (see _bson_check.c, bson_check.py).
def valid_entry(raw: bytes | bytearray | memoryview, max_nesting: int = 200, /) -> bool: ...
