"""Layer 1: where oplog entries come from (files now; live shard tailers later).

The only layer that does I/O.
"""

from __future__ import annotations

from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS, InputFormat, read_oplog_file

__all__ = ["OPLOG_CODEC_OPTIONS", "InputFormat", "read_oplog_file"]
