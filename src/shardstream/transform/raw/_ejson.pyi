from typing import Any

# The compiled half of extended_json (see _ejson.c): None where the Python walker must write.
def dumps(raw: bytes | bytearray | memoryview, relaxed: bool, /) -> str | None: ...

# A change event's row fields (see _event_fields.c): None where the Python reader must read.
def event_fields(
    raw: bytes | bytearray | memoryview, relaxed: bool, /
) -> tuple[Any, ...] | None: ...
