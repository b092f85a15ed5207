"""Part of the transform stage: formats only the 6.x servers still read.

Emulates ``change_stream_helpers_legacy.cpp`` (6.x line, e.g. commit 06447495) and the
legacy branches of change_stream_event_transform.cpp at 62d6f21d.  These helpers are
marked for removal once 7.0 branched, so they apply to ``server_version < (7, 0)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardstream.errors import TransformError
from shardstream.transform import fields as f


def convert_legacy_noop_o2(o2: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """Rewrite a pre-6.0 no-op ``o2: {type: <event>, ...}`` into the newer shape.

    The server drops ``type`` and appends ``<event>: <the entry's ns>`` as the *last*
    field (it says the order does not matter to it), so ``without(o2, <event>)`` later
    gives the remaining fields in their original order.  ``o2`` without ``type`` is
    returned as it is.
    """
    if "type" not in o2:
        return o2
    kind = o2["type"]
    if not isinstance(kind, str):
        raise TransformError(f"expected a legacy no-op's o2.type to be a string, got {kind!r:.60}")
    converted = {key: value for key, value in o2.items() if key != "type"}
    converted[kind] = namespace
    return converted


def new_shard_event_name(token_version: int, *, removed_legacy_name: bool) -> str:
    """The operationType of a ``migrateChunkToNewShard`` no-op.

    6.x/7.0 (``getNewShardDetectedOpName``) keep 6.0's ``kNewShardDetected`` for streams
    that write v1 tokens, so a 6.0 router still recognises the event; 7.1 and later
    always use ``migrateChunkToNewShard`` (the 8.0 transform names the constant directly).
    """
    if token_version < 2 and not removed_legacy_name:
        return f.NEW_SHARD_DETECTED_LEGACY
    return f.NEW_SHARD_DETECTED
