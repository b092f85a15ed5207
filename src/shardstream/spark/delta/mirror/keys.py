"""How the mirror keys its rows: namespace and the document's ``_id``, as stable text.

Rows are keyed by ``(db, coll, _id)``, not by the whole ``documentKey``: sharding or
resharding a collection changes the shard-key part of ``documentKey`` but never ``_id``,
which is unique per collection.  The ``_id`` is kept as compact canonical Extended JSON, so
equal values give equal strings (the ``_documentId`` column, the MERGE's key).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Final

from shardstream.errors import SinkError

RowKey = tuple[str, str, str]
"""(db, coll, the document's ``_id`` as compact canonical Extended JSON)."""
Namespace = tuple[str, str]
"""(db, coll)."""

# {"_id": {"$type": "text"}} with plain text (no escapes, no quotes): canonical Extended
# JSON of an _id that is one type wrapper, as documentKey holds it.
_WRAPPED_ID_KEY: Final = re.compile(r'\{"_id": \{"(\$[A-Za-z]+)": "([^"\\]*)"\}\}')


# An event's id is asked for several times per batch (planning, reading, applying).
@functools.lru_cache(maxsize=65536)
def document_id(document_key: str) -> str:
    """The ``_id`` part of a ``documentKey`` (canonical Extended JSON), as a stable string.

    >>> document_id('{"region": "eu", "_id": {"$numberInt": "7"}}')
    '{"$numberInt":"7"}'
    >>> document_id('{"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}}')
    '{"$oid":"65a1b2c3d4e5f60718293a4b"}'
    """
    # The common key, {_id: <one type wrapper>} (an ObjectId, a number), rewritten as text:
    # what the general way below returns for it, without a JSON parse and write per event.
    match = _WRAPPED_ID_KEY.fullmatch(document_key)
    if match is not None:
        return f'{{"{match[1]}":"{match[2]}"}}'
    try:
        value = json.loads(document_key)["_id"]
    except (ValueError, TypeError, KeyError) as exc:
        raise SinkError(
            f"expected documentKey as Extended JSON with an _id, got {document_key!r:.200}"
        ) from exc
    # The text is canonical Extended JSON, so equal _id values give equal strings.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
