"""A source transaction reaches the target as one transaction, or as single writes.

The target's oplog says which: mongod logs a committed transaction as one ``applyOps``
entry, and single writes as entries of their own.  The source's transactions are read
from the simulator's own merged events (``lsid`` + ``txnNumber``), independently of the
sync.  Final-state equality alone (the end-to-end tests) would pass either way.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from shardstream.emulator import EmulatedCluster
from shardstream.sim.documents import id_key
from shardstream.sim.emulated_source import EXPANDED, SimulatedSource
from shardstream.sim.reference_events import merged_events
from tests.cluster_sync.conftest import sync_to_the_end

Written = frozenset[tuple[str, bytes]]  # (namespace, _id key) of each document written


def _source_transactions(source: SimulatedSource) -> set[Written]:
    """The documents each source transaction wrote after the cut (the stream's part)."""
    # Keyed by commit time too: the simulator reuses a session's txnNumber (a server never
    # does), and a transaction's events all carry its commit time.
    written: dict[tuple[bytes, int, Any], set[tuple[str, bytes]]] = defaultdict(set)
    for event in merged_events(source.result, EXPANDED):
        if event["clusterTime"] <= source.cut or "txnNumber" not in event:
            continue
        ns = f"{event['ns']['db']}.{event['ns']['coll']}"
        key = (id_key(event["lsid"]["id"]), int(event["txnNumber"]), event["clusterTime"])
        written[key].add((ns, id_key(event["documentKey"]["_id"])))
    return {frozenset(documents) for documents in written.values()}


def _target_transactions(target: EmulatedCluster) -> list[Written]:
    """The documents of each ``applyOps`` entry in the target shards' oplogs."""
    found: list[Written] = []
    for shard in target.shards:
        for entry in shard.oplog.entries():
            if entry["op"] == "c" and "applyOps" in entry["o"]:
                found.append(
                    frozenset(
                        (op["ns"], id_key((op.get("o2") or op["o"])["_id"]))
                        for op in entry["o"]["applyOps"]
                    )
                )
    return found


@pytest.mark.parametrize("transactions", [True, False], ids=["as-transactions", "single"])
def test_each_source_transaction_commits_inside_one_target_transaction_unless_told_not_to(
    source: SimulatedSource, target: EmulatedCluster, transactions: bool
) -> None:
    expected = _source_transactions(source)
    assert len(expected) > 1  # the run has transactions after its cut
    sync_to_the_end(source, target, transactions=transactions).finish()
    applied = _target_transactions(target)
    if transactions:
        # Consecutive source transactions over the same writers may share a target
        # transaction (writer_lanes._joinable): each lies whole inside one, and a target
        # transaction holds nothing but the source transactions it took.
        assert all(any(txn <= one for one in applied) for txn in expected)
        for one in applied:
            assert one == frozenset().union(*(txn for txn in expected if txn <= one))
        assert len(applied) <= len(expected)
    else:
        assert applied == []
        assert "committransaction" not in target.mongos.commands_seen
