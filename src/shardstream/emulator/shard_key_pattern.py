"""Emulator: a shard key's pattern, as ``shardCollection`` checks it, and the index it needs.

A pattern is ascending fields or one hashed field; the collection needs an index whose
leading fields are the key's (hashed where the key is). See also
src/mongo/s/shard_key_pattern.cpp and src/mongo/db/s/shard_key_index_util.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardstream.emulator.faults import CommandError

Body = dict[str, Any]


def shard_key(key: Any) -> Body:
    """``key`` checked as a shard-key pattern: ascending fields, or one hashed field.

    Raises:
        CommandError: ``BadValue`` (2) for anything else.
    """
    kinds = list(key.values()) if isinstance(key, Mapping) else []
    ascending = all(v == 1 and not isinstance(v, bool) for v in kinds if v != "hashed")
    if not kinds or not ascending or kinds.count("hashed") > 1:
        raise CommandError(
            2,
            "BadValue",
            f"Unsupported shard key pattern {key!r}. Pattern must either be a single hashed "
            "field, or a list of ascending fields",
        )
    return dict(key)


def index_for(key: Mapping[str, Any], unique: bool) -> Body:
    """The index ``shardCollection`` builds on an empty collection, named as mongod names it."""
    name = "_".join(f"{field}_{'hashed' if v == 'hashed' else int(v)}" for field, v in key.items())
    return {"key": dict(key), "name": name, **({"unique": True} if unique else {})}


def serves(spec: Mapping[str, Any], key: Mapping[str, Any], unique: bool) -> bool:
    """Whether index ``spec`` can serve shard key ``key``: the key's fields first, hashed
    where the key is (and, for a unique key, an index on exactly those fields, unique)."""
    fields = list(spec["key"].items())[: len(key)]
    same = [name for name, _ in fields] == list(key) and all(
        (value == "hashed") == (key[name] == "hashed") for name, value in fields
    )
    return same and (not unique or (bool(spec.get("unique")) and len(spec["key"]) == len(key)))
