"""shardstream: a sharded MongoDB cluster's change stream, read shard by shard.

Tails every shard's oplog in parallel and produces exactly the change stream
``mongos`` would: the same events, field order, resume tokens (byte for byte)
and global order.  Layers, in data-flow order (imports only point downward):
``resume_token`` -> ``oplog`` -> ``transform`` -> ``merger`` -> ``spark``.
"""

from __future__ import annotations

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
from shardstream.merger.change_stream import ChangeStream, watch
from shardstream.resume_token import (
    ResumeToken,
    ResumeTokenData,
    TokenType,
    decode_token,
    encode_token,
)

__version__ = "0.1.0"

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
    "watch",
]
