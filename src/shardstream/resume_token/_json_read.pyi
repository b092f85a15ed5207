from collections.abc import Callable
from typing import Any

# The compiled half of token_json.loads (see _json_read.c): `unsure` where Python must read.
def loads(
    text: str,
    unsure: object,
    int64: type,
    object_id: type,
    date: Callable[[Any], Any],
    max_depth: int,
    /,
) -> Any: ...

# A document's BSON from its canonical Extended JSON (see _json_bson.c): None where Python
# must write it (token_json.document_bson).
def document_bson(text: str, max_depth: int, /) -> bytes | None: ...
