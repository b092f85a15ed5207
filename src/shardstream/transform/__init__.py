"""Oplog entries become change events, as a shard's $changeStream pipeline does.

Pure: no network, clock or client.  One module per server stage, assembled in
the server's order by :mod:`shardstream.transform.pipeline`.
"""

from __future__ import annotations

from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.extended_json import event_to_json
from shardstream.transform.field_list import FieldList
from shardstream.transform.lookup import DocumentLookup, PerShardLookup
from shardstream.transform.options import ChangeStreamOptions, StreamScope
from shardstream.transform.pipeline import ShardPipeline, transform_oplog
from shardstream.transform.stages.unwind_transaction import TransactionHistory

__all__ = [
    "ChangeEvent",
    "ChangeStreamOptions",
    "DocumentLookup",
    "FieldList",
    "PerShardLookup",
    "ShardPipeline",
    "StreamScope",
    "TransactionHistory",
    "event_to_json",
    "transform_oplog",
]
