"""Loading tests/data/transform_cases.json (copied from shared/vectors) for the runners."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bson import json_util
from bson.timestamp import Timestamp

from shardstream.transform import ChangeStreamOptions
from tests.paths import as_read_from_file, fast_run

VECTOR_FILE = Path(__file__).parents[1] / "data" / "transform_cases.json"
_JSON_OPTIONS = json_util.CANONICAL_JSON_OPTIONS
RAW_CASES: list[dict[str, Any]] = json.loads(VECTOR_FILE.read_text())
# The same file with every object as a list of pairs: keeps order and repeated keys exactly.
PAIR_CASES: list[Any] = json.loads(VECTOR_FILE.read_text(), object_pairs_hook=list)

# Cases whose server behaviour this project does not emulate, with the reason.
SKIPPED: dict[str, str] = {
    "shardCollection_noop_without_ui_master": "master-only behaviour (shardCollection noop "
    "without ui); shardstream emulates released servers up to 8.2",
}


# Cases whose recorded data contradicts itself, with the correction the bytes prove.
TOKEN_ERRATA: dict[str, tuple[str, dict[str, Any]]] = {
    "resume_token_high_water_mark_ts0": (
        "the expected _data 8200000000000000002B0229296E04 encodes version 1 (2B02), and a v2 "
        "high-water mark would end 2B0429296E1404 (v2 writes a null uuid); the tokenData's "
        "'version: 2' is the error",
        {"version": 1},
    ),
}


def server_version_for(versions: str) -> tuple[int, int]:
    """The server version a case's ``versions`` text asks for (newest where it allows)."""
    if "6.x only" in versions:
        return (6, 0)
    match = re.match(r"(\d+)\.(\d+)\+", versions)
    if match and (int(match.group(1)), int(match.group(2))) > (8, 2):
        raise ValueError(f"case needs a server newer than 8.2: {versions}")
    return (8, 2)


def options_for(case: dict[str, Any]) -> ChangeStreamOptions:
    """The stream options of one case (``options`` plus the version it holds for)."""
    options = case["options"]
    scope, ns = options["scope"], options["ns"]
    db: str | None = None
    coll: str | None = None
    if scope == "collection":
        db, _, coll = ns.partition(".")
    elif scope == "database":
        db = ns
    return ChangeStreamOptions(
        db=db,
        coll=coll,
        show_expanded_events=options.get("showExpandedEvents", False),
        show_migration_events=options.get("showMigrationEvents", False),
        show_system_events=options.get("showSystemEvents", False),
        show_raw_update_description=options.get("showRawUpdateDescription", False),
        merged_by_router=options.get("needsMerge", False),
        server_version=server_version_for(case["versions"]),
    )


def oplog_entries(case: dict[str, Any]) -> list[Any]:
    """The case's oplog entries as pymongo would decode them."""
    return [
        json_util.loads(json.dumps(entry), json_options=_JSON_OPTIONS) for entry in case["oplog"]
    ]


def as_one_oplog(entries: list[Any]) -> list[Any]:
    """The entries with each ts raised just above the one before where it is not.

    A few filter vectors put several entries at one ts, as the server's unit tests feed
    them to the stage; a replayed oplog file must increase in ts (oplog.ts_order).
    """
    fixed: list[Any] = []
    last: Timestamp | None = None
    for entry in entries:
        ts = entry.get("ts")
        if isinstance(ts, Timestamp) and last is not None and ts <= last:
            entry = {**entry, "ts": Timestamp(last.time, last.inc + 1)}
        last = entry.get("ts")
        fixed.append(entry)
    return fixed


def pairs(text: str) -> Any:
    """Parse JSON keeping order and duplicates (objects become lists of pairs)."""
    return json.loads(text, object_pairs_hook=list)


def fast_path_events(also: ChangeStreamOptions, corpora: Sequence[list[bytes]] = ()) -> list[bytes]:
    """The fast path's event bytes for every vector (under its own options, then under
    ``also`` scoped as the vector is), then for each corpus (oplog BSON) under ``also``."""
    runs: list[tuple[list[bytes], ChangeStreamOptions]] = []
    for case in RAW_CASES:
        if case["options"].get("kind") == "resumeTokenEncoding" or case["name"] in SKIPPED:
            continue
        options = options_for(case)
        docs = as_read_from_file(oplog_entries(case))
        runs += [(docs, options), (docs, also.with_options(db=options.db, coll=options.coll))]
    runs += [(docs, also) for docs in corpora]
    return [event for docs, options in runs for event in fast_run(docs, options)[0][1]]
