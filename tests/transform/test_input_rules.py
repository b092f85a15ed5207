"""Entries of the wrong shape: skipped where the server's filter skips them, else refused.

Each case is decided from mongod's source and named in its test's docstring:

* the oplog ``$match`` (change_stream_filter_helpers.cpp: ``buildOperationFilter``,
  ``buildTransactionFilter``, ``buildInternalOpFilter``) runs before any stage reads an
  entry; what it does not match is skipped, whatever its shape;
* ``ChangeStreamUnwindTransactionStage`` filters each op of a transaction with the same
  operation filter (``getNextTransactionOp``);
* what passes the filter is parsed (``_isTransactionOplogEntry``: ``repl::OpType_parse``)
  and transformed (``ChangeStreamDefaultEventTransformation::applyTransformation``), which
  fail the stream on a wrong type (``checkValueType``: 40532) or unknown op (BadValue: 2).

Every case goes through every replay path (tests/transform/replay_paths.py): one verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from tests import factories as make
from tests.transform.odd_entries import (
    KEY,
    around,
    assert_skipped,
    changed,
    insert,
    op,
    transaction,
)
from tests.transform.replay_paths import (
    ALL_PATHS,
    assert_refused,
    assert_same_output,
    run_paths,
    split_events,
)

# Skipped by the server's oplog filter.


@pytest.mark.parametrize(
    "entry",
    [
        insert(ns=None),
        insert(ns=7),
        insert(ns="shop"),
        insert(ns="config.system.sessions"),
        insert(
            ns="shop.system.views",
            o={"_id": "shop.v", "viewOn": "orders", "pipeline": []},
            o2={"_id": "shop.v"},
        ),
        insert(ns="admin.users"),
    ],
    ids=["missing", "int", "no-dot", "config.system.sessions", "system.views", "admin"],
)
def test_a_crud_entry_whose_ns_the_filter_does_not_match_is_skipped(
    entry: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: buildOperationFilter's CRUD arm is {ns: <nsRegex>, op not n/c}; the regex
    (getNsRegexForChangeStream) only matches a string "<db>.<coll>" outside admin, config
    and local whose collection is not system.* or $cmd, and no other arm takes op "i"."""
    assert_skipped(tmp_path, capsysbinary, entry)


@pytest.mark.parametrize(
    "entry",
    [
        transaction([op()] * 4, op="x"),
        transaction([op()] * 4, op=None),
        transaction([op()] * 4, op=1),
    ],
    ids=["unknown", "missing", "int"],
)
def test_a_transaction_entry_whose_op_is_not_c_is_skipped(
    entry: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: buildTransactionFilter matches applyOps and commitTransaction entries by
    {op: "c"}; as a CRUD entry, admin.$cmd fails buildOperationFilter's ns regex (admin
    and $cmd are excluded). The server never sees the transaction's 4 inserts either."""
    assert_skipped(tmp_path, capsysbinary, entry)


@pytest.mark.parametrize(
    "entry",
    [
        transaction([op()], o={"applyOps": {"0": make.inner(insert())}}),
        transaction([op()], o={"applyOps": "x"}),
        transaction([op()], o=None),
        transaction([op()], o=[1]),
    ],
    ids=["applyOps-document", "applyOps-string", "o-missing", "o-array-of-int"],
)
def test_an_applyops_entry_without_an_applyops_array_is_skipped(
    entry: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: buildTransactionFilter requires {"o.applyOps": {$type: "array"}} (or
    o.commitTransaction: 1), and the command arm of buildOperationFilter needs ns to
    match the watched databases' $cmd (not admin's) and o.<command> to name a
    collection: nothing matches, so the entry is skipped before unwinding."""
    assert_skipped(tmp_path, capsysbinary, entry)


def test_a_commit_without_o_is_skipped(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: buildTransactionFilter's {op: "c", "o.commitTransaction": 1} cannot match an
    entry without o; the prepared transaction it would commit is never read."""
    prepare = make.apply_ops(Timestamp(10, 2), [op()], prepare=True)
    commit = changed(make.commit(Timestamp(10, 3), Timestamp(10, 2), Timestamp(10, 2)), {})
    del commit["o"]
    entries = [
        make.insert(Timestamp(10, 1), {"_id": ObjectId("65f0000000000000000000a1")}),
        prepare,
        commit,
        make.insert(Timestamp(10, 4), {"_id": ObjectId("65f0000000000000000000a3")}),
    ]
    verdicts = run_paths(tmp_path, entries, capsysbinary)
    assert_same_output(verdicts)
    assert len(split_events(verdicts["fast"].out)) == 2


@pytest.mark.parametrize(
    "bad",
    [op(ns=None), op(ns=7), op(ns="admin.x")],
    ids=["ns-missing", "ns-int", "ns-admin"],
)
def test_a_transaction_op_the_filter_does_not_match_is_skipped_but_counted(
    bad: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: ChangeStreamUnwindTransactionStage::TransactionOpIterator::getNextTransactionOp
    runs each op through the operation filter (ns regex), skipping it but counting its
    txnOpIndex; the entry itself passes buildTransactionFilter through its other op."""
    good = op(o={"_id": KEY}, o2={"_id": KEY})
    verdicts = run_paths(tmp_path, around(transaction([bad, good])), capsysbinary)
    assert_same_output(verdicts)
    assert len(split_events(verdicts["fast"].out)) == 3
    # The op that remains is the transaction's second: txnOpIndex 1 in its token.
    alone = run_paths(tmp_path, around(transaction([good])), capsysbinary, ("fast",), name="alone")
    assert verdicts["fast"].out != alone["fast"].out


def test_a_transaction_entry_without_ns_is_still_unwound(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: buildTransactionFilter does not look at the applyOps entry's own ns (each
    op is filtered by its own ns), so the transaction's events are all reported."""
    entry = transaction([op(), op(o={"_id": KEY, "y": 2})], ns=None)
    verdicts = run_paths(tmp_path, around(entry), capsysbinary)
    assert_same_output(verdicts)
    assert len(split_events(verdicts["fast"].out)) == 4


# Matched by the filter, then refused as the server refuses them.


@pytest.mark.parametrize(
    ("entry", "code", "fragment"),
    [
        (insert(op="x"), 2, "expected op to be one of i, u, d, c, n, got 'x'"),
        (insert(op="insert"), 2, "got 'insert'"),
        (insert(op=None), 40532, "expected op to be a string"),
        (insert(op=1), 40532, "expected op to be a string"),
    ],
    ids=["unknown", "long-name", "missing", "int"],
)
def test_a_crud_entry_with_a_bad_op_on_a_watched_ns_fails_the_stream(
    entry: dict[str, Any],
    code: int,
    fragment: str,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """server: buildOperationFilter's CRUD arm takes any op but n and c on a watched ns;
    ChangeStreamUnwindTransactionStage::_isTransactionOplogEntry then parses op with
    repl::OpType_parse (unknown name: BadValue, 2), and applyTransformation's
    getOplogOpType checks its type first (checkValueType: 40532)."""
    verdicts = run_paths(tmp_path, around(entry), capsysbinary)
    assert_refused(verdicts, fragment, f"[server error {code}]", "Timestamp(10, 2)")


@pytest.mark.parametrize(
    "entry",
    [insert(o=None), transaction([op(o=None)]), insert(o=[{"_id": KEY}])],
    ids=["insert", "in-a-transaction", "o-array"],
)
def test_an_insert_without_a_document_fails_the_stream(
    entry: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: the insert passes buildOperationFilter (and the unwind filter), and
    applyTransformation copies o as fullDocument unchecked; but o is required by the
    oplog's schema (repl/oplog_entry.idl, DurableReplOperation.o: object, enforced by
    OplogEntry::parse), so no oplog holds such an entry: we refuse it rather than write
    an event without its document."""
    verdicts = run_paths(tmp_path, around(entry), capsysbinary)
    assert_refused(verdicts, "expected o to be a document", "Timestamp(10, 2)")


def test_every_path_is_covered() -> None:
    assert set(ALL_PATHS) == {
        "fast",
        "fast-json",
        "reference",
        "expanded",
        "merge",
        "workers",
        "merge-reference",
    }


@pytest.mark.parametrize("damaged_o", [None, 5], ids=["missing", "not-a-document"])
def test_a_transaction_chain_entry_without_its_document_fails_the_stream(
    damaged_o: Any, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: the commit's TransactionHistoryIterator reads each earlier entry of the chain
    back by optime and parses it as an OplogEntry (o: object, repl/oplog_entry.idl); its
    applyOps must be an array (5543806). The chain entry itself is skipped by
    buildTransactionFilter (no o.applyOps array); the commit fails."""
    partial = make.apply_ops(Timestamp(10, 2), [op()], partial=True)
    partial = changed(partial, {"o": damaged_o}) if damaged_o is not None else partial
    if damaged_o is None:
        del partial["o"]
    last = make.apply_ops(Timestamp(10, 3), [op(o={"_id": KEY, "y": 2})], prev=Timestamp(10, 2))
    entries = [around(insert())[0], partial, last, insert(ts=Timestamp(10, 4))]
    verdicts = run_paths(tmp_path, entries, capsysbinary)
    # Every path finds the damaged entry, read back from the file or kept in memory, and
    # fails the stream at the commit as mongod does (5543806), never with a traceback.
    for message in assert_refused(verdicts, "(entry ts Timestamp(10, 3))"):
        assert "[server error 5543806]" in message


def test_an_insert_of_a_dbref_shaped_document_is_an_ordinary_insert(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Found by the fuzz suite. server: o is any object (oplog_entry.idl) and
    applyTransformation copies it as fullDocument; {$ref, $id} is a document like any other
    (pymongo alone decodes it as a DBRef), so every path writes the insert."""
    entry = insert(o={"$ref": "c", "$id": 1}, o2={"_id": KEY})
    verdicts = run_paths(tmp_path, around(entry), capsysbinary)
    assert_same_output(verdicts)
    assert len(split_events(verdicts["fast"].out)) == 3


@pytest.mark.parametrize("points_to", [(10, 3), (10, 4)], ids=["itself", "later"])
def test_a_transaction_chain_that_does_not_go_back_fails_instead_of_circling(
    points_to: tuple[int, int], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """A commit whose prevOpTime is its own ts (or later) would make the chain's walk circle
    for ever: mongod's TransactionHistoryIterator follows prevOpTime with no guard, and a
    real oplog never holds such a pointer (each entry of a transaction is written after the
    one before it). Found by the fuzz campaign as a hang; refused on every path."""
    partial = make.apply_ops(Timestamp(10, 2), [op()], partial=True)
    last = make.apply_ops(
        Timestamp(10, 3), [op(o={"_id": KEY, "y": 2})], prev=Timestamp(*points_to)
    )
    entries = [around(insert())[0], partial, last, insert(ts=Timestamp(10, 4))]
    verdicts = run_paths(tmp_path, entries, capsysbinary)
    assert_refused(
        verdicts,
        "expected prevOpTime before its entry's ts Timestamp(10, 3)",
        f"got {Timestamp(*points_to)!r}",
    )
