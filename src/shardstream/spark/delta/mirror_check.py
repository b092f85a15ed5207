"""Checks: compare the lakehouse tables with what the stream should have produced.

The demo and the tests compare a mirror with a simulated cluster's true final data as
BSON bytes (field order and types count), in the shape of
:func:`shardstream.sim.apply_events.encoded_state`, and a change log with the tokens of
the merged stream (every event exactly once).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import bson
import pyarrow as pa

from shardstream.errors import SinkError
from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.changelog import CHANGELOG_SCHEMA, CHANGELOG_TABLE
from shardstream.spark.delta.commits import open_table
from shardstream.spark.delta.mirror_prepare import MIRROR_SCHEMA


def read_table(root: str | Path, name: str) -> pa.Table:
    """A whole lakehouse table (``changelog`` or ``mirror``); empty when it does not exist."""
    table = open_table(Path(root) / name)
    schema = CHANGELOG_SCHEMA if name == CHANGELOG_TABLE else MIRROR_SCHEMA
    if table is None:
        return schema.empty_table()
    return table.to_pyarrow_table().cast(schema)


def mirror_state(mirror: pa.Table) -> dict[tuple[str, str], dict[bytes, bytes]]:
    """The mirror as ``{(db, coll): {BSON of {_id}: BSON of the document}}``.

    Raises:
        SinkError: two rows hold the same document.
    """
    state: dict[tuple[str, str], dict[bytes, bytes]] = {}
    for row in mirror.select(["db", "coll", "documentKey", "fullDocument"]).to_pylist():
        key = bson.encode({"_id": loads(row["documentKey"])["_id"]})
        documents = state.setdefault((row["db"], row["coll"]), {})
        if key in documents:
            raise SinkError(f"expected one mirror row per document, got two for {row!r:.200}")
        documents[key] = bson.encode(loads(row["fullDocument"]))
    return state


def changelog_difference(changelog: pa.Table, expected: Sequence[str]) -> dict[str, int]:
    """How a change log's tokens differ from the expected stream's (empty dict: equal).

    Returns:
        The non-zero counts among ``missing`` and ``unexpected`` tokens and
        ``duplicates`` (rows beyond the first per token).
    """
    tokens: list[str] = changelog["_id"].to_pylist()
    present = set(tokens)
    wanted = set(expected)
    difference = {
        "missing": len(wanted - present),
        "unexpected": len(present - wanted),
        "duplicates": len(tokens) - len(present),
    }
    return {name: count for name, count in difference.items() if count}
