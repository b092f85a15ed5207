"""The fast path of the merge: events that stay BSON until a reader decodes them.

``shard_reader`` (``FastShardReader``) is the twin of :mod:`shardstream.merger.shard_reader`
(the same promise rules, through ``ShardPromise``); ``encoded_event`` carries the bytes
through the AsyncResultsMerger; ``encoded_merge`` merges whole encoded batches offline.
"""

from __future__ import annotations

from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.raw.encoded_merge import merge_encoded, merge_encoded_batches
from shardstream.merger.raw.shard_reader import FastShardReader

__all__ = ["EncodedEvent", "FastShardReader", "merge_encoded", "merge_encoded_batches"]
