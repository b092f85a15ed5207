"""Odd oplog entries for the input-rule tests: one entry at t=10 between two inserts.

Builders take field changes as keywords; a value of None removes the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from tests import factories as make
from tests.transform.replay_paths import assert_same_output, run_paths, split_events

KEY = ObjectId("65f000000000000000000001")


def around(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """``entry`` at t=10 between two ordinary inserts."""
    return [
        make.insert(Timestamp(10, 1), {"_id": ObjectId("65f0000000000000000000a1")}),
        entry,
        make.insert(Timestamp(10, 3), {"_id": ObjectId("65f0000000000000000000a3")}),
    ]


def insert(**changes: Any) -> dict[str, Any]:
    """An insert of ``{_id: KEY, x: 1}`` into db.coll at t=10, with ``changes``."""
    entry = make.insert(Timestamp(10, 2), {"_id": KEY, "x": 1})
    return changed(entry, changes)


def changed(entry: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``entry`` with ``changes`` (None: the field removed)."""
    entry = dict(entry)
    for name, value in changes.items():
        if value is None:
            entry.pop(name, None)
        else:
            entry[name] = value
    return entry


def transaction(ops: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    """A one-entry transaction of ``ops`` at t=10 (admin.$cmd applyOps), with ``changes``."""
    return changed(make.apply_ops(Timestamp(10, 2), ops), changes)


def op(**changes: Any) -> dict[str, Any]:
    """One insert as it sits inside applyOps."""
    return changed(make.inner(insert()), changes)


def assert_skipped(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], entry: dict[str, Any]
) -> None:
    """Every path succeeds and writes what it writes for the oplog without ``entry``."""
    verdicts = run_paths(tmp_path, around(entry), capsysbinary)
    assert_same_output(verdicts)
    without = run_paths(
        tmp_path, around(entry)[::2], capsysbinary, ("fast", "merge"), name="without"
    )
    assert verdicts["fast"].out == without["fast"].out
    assert verdicts["merge"].out == without["merge"].out
    assert len(split_events(verdicts["fast"].out)) == 2
