"""Emulator: mongos refuses an upsert into a sharded collection it cannot target by shard key.

Before 7.1 mongos routes an upsert by the shard key it extracts from the query alone, never
from a replacement document: targeted by the replacement, an upsert could insert on one
shard while the document it should have matched lives on another.  So an upsert whose
query lacks an equality on every field of the shard key fails, each such operation with a
write error ``ShardKeyNotFound`` (61), "Failed to target upsert by query :: could not
extract exact shard key", while the batch's other operations go on as an ordered or
unordered batch does.  From feature compatibility version 7.1 (``updateOneWithoutShardKey``)
mongos finds the document by its query first, and takes such an upsert; the emulator runs
at its release's own version, so the rule holds below wire version 22 (7.1).

An equality is ``{field: value}`` or ``{field: {$eq: value}}`` on the key's path (dotted
for a nested field) or on a parent of it whose value holds the field, and no other on a
parent or child of that path (mongos finds no exact value then); ``null`` counts, as a
document without the field has a null shard key value.  An array or a regular expression is
no exact value.  The emulated mongos checks this against its catalog
(:mod:`~shardstream.emulator.sharding_commands`); the documents still all live on the
primary shard.

Below 7.1 a shard also refuses an update (no upsert) that would change its document's shard
key value by a query without the whole key: write error 31025, "Shard key update is not
allowed without specifying the full shard key in the query" (an ``_id``-only query has no
canonical query to check).  mongos passes the key along with the update it forwards, and
the shard checks each operation against the document as it stands then.  Not emulated: the
refusal of a key change outside a retryable write or transaction (``IllegalOperation``),
and moving the document to another shard (there is one).

See also src/mongo/s/collection_routing_info_targeter.cpp (``targetUpdate``) and
jstests/sharding/upsert_sharded.js.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import bson
from bson.regex import Regex

from shardstream.emulator.cursors import MISSING, lookup
from shardstream.emulator.faults import WriteError

Body = dict[str, Any]
Handler = Callable[[Body], Body]
SHARD_KEY_NOT_FOUND: Final = 61
KEY_UPDATE_WITHOUT_KEY: Final = 31025
# The internal field mongos adds to an update it forwards: the collection's shard key.
SHARD_KEY_FIELD: Final = "$_emulatorShardKey"
FIRST_WIRE_VERSION_WITHOUT_KEY: Final = 22  # 7.1
_REFUSED: Final = "Failed to target upsert by query :: could not extract exact shard key"


def update_targeting(
    forward: Handler, sharded: Callable[[str], Body | None], wire_version: int
) -> Handler:
    """``forward`` (mongos's ``update``) behind the checks; unchanged from 7.1 on."""
    if wire_version >= FIRST_WIRE_VERSION_WITHOUT_KEY:
        return forward

    def update(body: Body) -> Body:
        entry = sharded(f"{body.get('$db')}.{body.get('update')}")
        specs = body.get("updates")
        if entry is None or not isinstance(specs, list):
            return forward(body)
        # The shard knows its collection's key (here from mongos, as shardVersion tells
        # a real shard to use its own): it refuses to change it by a query without it.
        body = {**body, SHARD_KEY_FIELD: dict(entry["key"])}
        refused = [
            n
            for n, spec in enumerate(specs)
            if isinstance(spec, Mapping)
            and spec.get("upsert")
            and not exact_shard_key(spec.get("q") or {}, entry["key"])
        ]
        if not refused:
            return forward(body)
        return _partly_refused(forward, body, specs, refused)

    return update


def refuse_key_change(
    key: Mapping[str, Any] | None, query: Mapping[str, Any], pre: Body, post: Body
) -> None:
    """On a shard before 7.1: refuse an update that changes the shard key ``key`` of its
    document by a query without the whole key (None: the collection is not sharded).

    Raises:
        WriteError: ``31025``, as the shard's update stage raises it.
    """
    if key is None or exact_shard_key(query, key):
        return
    if _key_bytes(pre, key) != _key_bytes(post, key):
        raise WriteError(
            KEY_UPDATE_WITHOUT_KEY,
            f"Location{KEY_UPDATE_WITHOUT_KEY}",
            "Shard key update is not allowed without specifying the full shard key in the query",
        )


def exact_shard_key(query: Mapping[str, Any], key: Mapping[str, Any]) -> bool:
    """Whether ``query`` holds an exact value for every field of the shard key ``key``."""
    return all(_exact_value(query, path) for path in key)


def _key_bytes(document: Mapping[str, Any], key: Mapping[str, Any]) -> bytes:
    # Compared as the server does, bit for bit (1 and 1.0 differ), a missing field as null.
    values = {}
    for n, path in enumerate(key):
        value = lookup(document, path)
        values[str(n)] = None if value is MISSING else value
    return bson.encode(values)


def _exact_value(query: Mapping[str, Any], path: str) -> bool:
    # The path's own equality, or a parent's ({a: {b: 1}} gives a.b), as mongos finds it;
    # none when the query also matches another path on it (a parent and the path, or a
    # child of it), which mongos counts as no exact value.
    related = [
        name
        for name in query
        if name == path or path.startswith(f"{name}.") or name.startswith(f"{path}.")
    ]
    if len(related) != 1 or related[0].startswith(f"{path}."):
        return False
    value = query[related[0]]
    if isinstance(value, Mapping) and any(str(name).startswith("$") for name in value):
        if list(value) != ["$eq"]:
            return False
        value = value["$eq"]
    for part in path.split(".")[related[0].count(".") + 1 :]:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return not isinstance(value, list | Regex | re.Pattern)


def _partly_refused(forward: Handler, body: Body, specs: list[Any], refused: list[int]) -> Body:
    """Forward what mongos would still send, then add the refused operations' errors.

    Ordered, the batch stops at the first refused operation (or at an earlier write error
    of the shard); unordered, every other operation is sent.
    """
    ordered = body.get("ordered", True) is not False
    kept = (
        list(range(refused[0]))
        if ordered
        else [n for n in range(len(specs)) if n not in set(refused)]
    )
    reply: Body = {"n": 0, "nModified": 0, "ok": 1.0}
    if kept:
        reply = dict(forward({**body, "updates": [specs[n] for n in kept]}))
        if reply.get("ok") != 1:
            return reply
    errors = [{**error, "index": kept[error["index"]]} for error in reply.get("writeErrors", [])]
    if "upserted" in reply:
        reply["upserted"] = [{**u, "index": kept[u["index"]]} for u in reply["upserted"]]
    if not (ordered and errors):
        errors.extend(
            {
                "index": n,
                "code": SHARD_KEY_NOT_FOUND,
                "codeName": "ShardKeyNotFound",
                "errmsg": _REFUSED,
            }
            for n in (refused[:1] if ordered else refused)
        )
    reply["writeErrors"] = sorted(errors, key=lambda error: int(error["index"]))
    return reply
