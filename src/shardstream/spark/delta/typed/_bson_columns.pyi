from typing import Any

# A collection's typed columns from its documents' BSON (see _bson_columns.c): per column its
# Arrow array's parts or None (left to Python), and the rows holding a field no column names;
# None where an item is no BSON document.
def bson_columns(
    raws: list[bytes | None], plan: tuple[tuple[bytes, tuple[int, Any]], ...], /
) -> tuple[tuple[tuple[Any, ...] | None, ...], list[int]] | None: ...
