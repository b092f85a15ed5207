"""The oplog filter is a query: it looks into arrays, and the transform then refuses them.

server: the filter of change_stream_filter_helpers.cpp is a MatchExpression, so MQL's
rules apply to oddly typed fields: {ns: <regex>} matches an array holding a matching string,
{op: "c"} an array holding "c", and a dotted path (o.drop, o2.shardCollection) looks into
each document of an array. Such an entry passes the filter, and
ChangeStreamDefaultEventTransformation::applyTransformation then fails on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bson.code import Code
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.transform import ChangeStreamOptions, transform_oplog
from tests import factories as make
from tests.transform.odd_entries import around, assert_skipped, changed, insert, op, transaction
from tests.transform.replay_paths import assert_refused, run_paths


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        (insert(ns=["db.coll"]), "expected ns to be a string"),
        (insert(op=["i"]), "expected op to be a string"),
        (
            changed(
                make.command(Timestamp(10, 2), "db", {"drop": "coll"}),
                {"o": [{"drop": "coll"}]},
            ),
            "expected o to be a document",
        ),
        (
            changed(
                make.noop(Timestamp(10, 2), {"shardCollection": "db.coll"}, ns="db.coll"),
                {"o2": [{"shardCollection": "db.coll"}]},
            ),
            "o2 to be a document",
        ),
        (transaction([op()], o=[{"applyOps": [op()]}]), "expected o to be a document"),
        (transaction([op()], o=[{"commitTransaction": 1}]), "expected o to be a document"),
    ],
    ids=["ns-array", "op-array", "command-o-array", "noop-o2-array", "applyOps-o-array",
         "commit-o-array"],
)  # fmt: skip
def test_the_filter_looks_into_arrays_and_the_transform_refuses_them(
    entry: dict[str, Any],
    fragment: str,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """server: the oplog filter is a MatchExpression: {ns: <regex>} matches an array holding
    a matching string, {op: "c"} an array holding "c", and a dotted path such as o.drop or
    o2.shardCollection looks into each document of an array (implicit array traversal);
    the entry passes, and applyTransformation then fails on it (checkValueType 40532 for
    ns and op, Value::getDocument's verify for o and o2)."""
    verdicts = run_paths(tmp_path, around(entry), capsysbinary)
    assert_refused(verdicts, fragment, "Timestamp(10, 2)")


def test_a_noop_whose_op_array_holds_n_is_no_crud_entry(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: buildOperationFilter's CRUD arm is $nor [{op: "n"}, {op: "c"}], and {op: "n"}
    matches ["n"]; without an o2 naming an internal event nothing else matches: skipped."""
    assert_skipped(tmp_path, capsysbinary, insert(op=["n"]))


def test_javascript_code_is_no_string_to_the_filter_or_the_transform(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: a BSON Code value is not a String: {ns: <regex>} does not match it (the
    insert is skipped), and an op of type Code fails checkValueType(op, String), 40532."""
    assert_skipped(tmp_path, capsysbinary, insert(ns=Code("db.coll")))
    verdicts = run_paths(tmp_path, around(insert(op=Code("i"))), capsysbinary, name="code-op")
    assert_refused(verdicts, "expected op to be a string", "[server error 40532]")


def test_a_value_bson_cannot_hold_is_refused_not_a_traceback() -> None:
    """An Extended JSON integer beyond 64 bits reaches the transform (no oplog holds one):
    the event cannot be encoded, and the stream fails with a TransformError."""
    entry = transaction([op()])
    entry["txnNumber"] = Int64(2**70)
    with pytest.raises(TransformError, match="cannot encode") as raised:
        list(transform_oplog([entry], ChangeStreamOptions()))
    assert raised.value.ts == Timestamp(10, 2)
