"""Where oplog entries come from: files, and (in :mod:`shardstream.oplog.live`) live shards.

The only layer that does network I/O.  :class:`OplogSource` is the contract every source
meets (the merger reads nothing else); files are read by ``file_reader`` / ``file_source``
(dicts) and ``raw_file_reader`` (raw BSON, for the fast path).
"""

from __future__ import annotations

from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS, InputFormat, read_oplog_file

__all__ = ["OPLOG_CODEC_OPTIONS", "InputFormat", "read_oplog_file"]
