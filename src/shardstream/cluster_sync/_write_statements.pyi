from typing import Any

# A change event's target write built from its bytes (see _write_statements.c): (kind, db,
# coll, route, statement, token, clusterTime as seconds << 32 | increment, lsid BSON,
# txnNumber), or None where the event is planned in Python.
def write_statement(
    raw: bytes | bytearray | memoryview, /
) -> tuple[int, str, str, bytes, bytes, dict[str, Any], int, bytes | None, int | None] | None: ...
