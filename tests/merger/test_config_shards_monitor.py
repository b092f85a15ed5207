"""ConfigShardsMonitor over a recorded config-server oplog: what becomes a shard change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp

from shardstream.errors import MergeError
from shardstream.merger.config_shards_monitor import ConfigShardsMonitor
from shardstream.merger.topology import ShardChangeKind
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.source import OplogSource
from tests import factories as make

T = [Timestamp(1700000400, i) for i in range(10)]
NS = "config.shards"


def _monitor(
    tmp_path: Path, entries: list[dict[str, Any]], opened: list[Any]
) -> ConfigShardsMonitor:
    path = tmp_path / "config.bson"
    path.write_bytes(b"".join(bson.encode(entry) for entry in entries))

    def open_shard(name: str, host: str, at: Timestamp) -> OplogSource:
        opened.append((name, host, at))
        return FileOplogSource(name, str(path))

    return ConfigShardsMonitor(FileOplogSource("config", str(path)), T[1], open_shard)


def test_inserts_add_shards_deletes_remove_them_updates_change_nothing(tmp_path: Path) -> None:
    added = {"_id": "shard09", "host": "rs9/h1:27018,h2:27018", "state": 1}
    in_txn = {"_id": "shard10", "host": "rs10/h3:27018", "state": 1}
    entries = [
        make.noop(T[1]),
        make.insert(T[2], added, ns=NS),
        make.update(T[3], "shard09", {"u": {"draining": True}}, ns=NS),
        make.apply_ops(T[4], [make.inner(make.insert(T[4], in_txn, ns=NS))]),
        make.delete(T[5], "shard09", ns=NS),
        make.insert(T[6], {"_id": 1}, ns="config.chunks"),  # another config collection
    ]
    opened: list[Any] = []
    batch = _monitor(tmp_path, entries, opened).next_batch()
    assert batch is not None
    assert [(c.ts, c.kind, c.shard) for c in batch.changes] == [
        (T[2], ShardChangeKind.ADDED, "shard09"),
        (T[4], ShardChangeKind.ADDED, "shard10"),
        (T[5], ShardChangeKind.REMOVED, "shard09"),
    ]
    assert batch.promise == T[6]
    opener = batch.changes[1].open_source
    assert opener is not None
    opener()
    assert opened == [("shard10", "rs10/h3:27018", T[4])]


def test_a_shard_document_without_host_is_refused(tmp_path: Path) -> None:
    entries = [make.noop(T[1]), make.insert(T[2], {"_id": "shard09"}, ns=NS)]
    with pytest.raises(MergeError, match="hold a host"):
        _monitor(tmp_path, entries, []).next_batch()
