"""Simulator: document contents, replacements and ``$v:2`` diffs for the workload.

Documents look like a small shop's records (status, quantity, price, tags and a
nested ``meta``).  Diffs are built the way the server's update system writes
them (doc_diff.h, ``DocumentDiffBuilder``): sections ``d, u, i`` then sub-diffs, ``$set`` of an
existing field in ``u`` and of a new one in ``i``, ``$unset`` in ``d``, and array
changes as an array diff (``a: true``, ``u<index>``, ``l`` when it shrinks).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from typing import Any, Final

import bson

STATUSES: Final = ("new", "paid", "packed", "shipped", "delivered", "returned")
TAGS: Final = ("gift", "bulk", "express", "fragile", "promo", "repeat", "vip")
SOURCES: Final = ("web", "app", "store", "partner")
OPTIONAL_FIELDS: Final = ("note", "coupon", "priority", "channel")


def id_key(value: Any) -> bytes:
    """The hashable form of an ``_id`` used as a key of ``final_state``: its BSON bytes.

    Bytes keep BSON types apart (``1`` and ``"1"``; ``True`` and ``1``), which Python
    equality would not.

    >>> id_key(7) == id_key(7), id_key(7) == id_key("7")
    (True, False)
    """
    return bson.encode({"_id": value})


def _body(rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": rng.choice(STATUSES),
        "qty": rng.randint(1, 50),
        "price": round(rng.uniform(1, 500), 2),
        "tags": rng.sample(TAGS, rng.randint(0, 3)),
        "meta": {"source": rng.choice(SOURCES), "rev": 0},
    }
    if rng.random() < 0.3:
        body[rng.choice(OPTIONAL_FIELDS)] = _value(rng)
    return body


def _value(rng: random.Random) -> Any:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randint(-1000, 1000)
    if kind == 1:
        return rng.choice(TAGS) + "-" + str(rng.randrange(100))
    if kind == 2:
        return rng.random() < 0.5
    return {"by": rng.choice(SOURCES), "n": rng.randrange(10)}


def new_document(rng: random.Random, head: Mapping[str, Any]) -> dict[str, Any]:
    """A new document: ``head`` (``_id`` first, then shard-key fields), then a random body."""
    return {**head, **_body(rng)}


def replacement(
    rng: random.Random, old: Mapping[str, Any], kept: Collection[str]
) -> dict[str, Any]:
    """A replacement of ``old`` keeping the fields ``kept`` (``_id``, shard key) in place."""
    head = {name: value for name, value in old.items() if name in kept}
    return {**head, **_body(rng)}


def random_diff(
    rng: random.Random,
    document: Mapping[str, Any],
    protected: Collection[str],
    nested_fraction: float,
) -> dict[str, Any]:
    """A non-empty ``$v:2`` diff that changes ``document`` but not ``protected`` fields.

    Args:
        rng: the randomness.
        document: the current document.
        protected: fields the update must not touch (``_id`` and the shard key).
        nested_fraction: probability of a sub-diff (into ``meta`` or the ``tags`` array).
    """
    deletes: dict[str, Any] = {}
    updates: dict[str, Any] = {}
    inserts: dict[str, Any] = {}
    subdiffs: dict[str, Any] = {}
    touched: set[str] = set(protected)
    if rng.random() < nested_fraction:
        _add_subdiff(rng, document, touched, subdiffs)
    for _ in range(rng.randint(0 if subdiffs else 1, 3)):
        action = rng.randrange(3)
        present = [name for name in document if name not in touched]
        absent = [name for name in OPTIONAL_FIELDS if name not in document and name not in touched]
        if action == 0 and present:
            name = rng.choice(present)
            updates[name] = _changed_value(rng, name, document[name])
        elif action == 1 and absent:
            name = rng.choice(absent)
            inserts[name] = _value(rng)
        else:
            optional = [name for name in present if name in OPTIONAL_FIELDS or name == "tags"]
            if not optional:
                continue
            name = rng.choice(optional)
            deletes[name] = False
        touched.add(name)
    if not (deletes or updates or inserts or subdiffs):
        # Every field was protected or already touched; a new field always works.
        name = f"x{rng.randrange(10**6)}"
        inserts[name] = _value(rng)
    diff: dict[str, Any] = {}
    for section, fields in (("d", deletes), ("u", updates), ("i", inserts)):
        if fields:
            diff[section] = fields
    diff.update(subdiffs)
    return diff


def _changed_value(rng: random.Random, name: str, old: Any) -> Any:
    # The server logs no entry for an update that changes nothing, so neither do we.
    for _ in range(8):
        value = _new_value(rng, name)
        if _encoded(value) != _encoded(old):
            return value
    return f"{name}-{rng.randrange(10**9)}"


def _encoded(value: Any) -> bytes:
    return bson.encode({"": value})


def _new_value(rng: random.Random, name: str) -> Any:
    if name == "status":
        return rng.choice(STATUSES)
    if name == "qty":
        return rng.randint(1, 50)
    if name == "price":
        return round(rng.uniform(1, 500), 2)
    if name == "tags":
        return rng.sample(TAGS, rng.randint(0, 3))
    if name == "meta":
        return {"source": rng.choice(SOURCES), "rev": 0}
    return _value(rng)


def _add_subdiff(
    rng: random.Random,
    document: Mapping[str, Any],
    touched: set[str],
    subdiffs: dict[str, Any],
) -> None:
    meta, tags = document.get("meta"), document.get("tags")
    if isinstance(tags, list) and "tags" not in touched and rng.random() < 0.5:
        if len(tags) >= 2 and rng.random() < 0.3:
            # The server writes `l` only when an array got shorter.
            subdiffs["stags"] = {"a": True, "l": len(tags) - 1}
        else:
            index = rng.randrange(len(tags) + 1)  # len(tags) appends
            current = tags[index] if index < len(tags) else None
            tag = rng.choice([tag for tag in TAGS if tag != current])
            subdiffs["stags"] = {"a": True, f"u{index}": tag}
        touched.add("tags")
    elif isinstance(meta, dict) and "meta" not in touched:
        sub: dict[str, Any] = {}
        rev = meta.get("rev")
        if isinstance(rev, int) and not isinstance(rev, bool):
            sub["u"] = {"rev": rev + 1}
        if "by" not in meta and rng.random() < 0.5:
            sub["i"] = {"by": rng.choice(SOURCES)}
        elif "by" in meta and rng.random() < 0.3:
            sub = {"d": {"by": False}, **sub}
        if sub:
            subdiffs["smeta"] = sub
            touched.add("meta")
