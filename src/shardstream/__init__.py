"""shardstream: a sharded MongoDB cluster's change stream, read shard by shard.

Tails every shard's oplog in parallel and produces exactly the change stream
``mongos`` would: the same events, field order, resume tokens (byte for byte)
and global order.  Layers, in data-flow order (imports only point downward):
``resume_token`` -> ``oplog`` -> ``transform`` -> ``merger`` -> ``spark``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from shardstream.errors import (
    ChangeStreamHistoryLost,
    ConfigurationError,
    MergeError,
    OplogError,
    ResumeTokenError,
    ResumeTokenNotFound,
    ShardstreamError,
    TransformError,
)
from shardstream.resume_token import (
    ResumeToken,
    ResumeTokenData,
    TokenType,
    decode_token,
    encode_token,
)

if TYPE_CHECKING:
    from shardstream.change_stream import ChangeStream
    from shardstream.cluster_sync import sync, verify
    from shardstream.stream import watch

__version__ = "0.1.0"

# watch() needs pymongo (~0.15 s to import); the offline commands (replay, token) never
# do, so it is imported on first use and their start-up stays short.
_LAZY = {"ChangeStream": "shardstream.change_stream", "watch": "shardstream.stream"}
_LAZY_SYNC = {"sync", "verify"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _LAZY_SYNC:
        from shardstream import cluster_sync

        return getattr(cluster_sync, name)
    raise AttributeError(f"module 'shardstream' has no attribute {name!r}")


__all__ = [
    "ChangeStream",
    "ChangeStreamHistoryLost",
    "ConfigurationError",
    "MergeError",
    "OplogError",
    "ResumeToken",
    "ResumeTokenData",
    "ResumeTokenError",
    "ResumeTokenNotFound",
    "ShardstreamError",
    "TokenType",
    "TransformError",
    "decode_token",
    "encode_token",
    "sync",
    "verify",
    "watch",
]
