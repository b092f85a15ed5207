"""The benchmark corpus: see :mod:`shardstream.bench.corpus` (``shardstream bench`` uses it too)."""

from __future__ import annotations

from shardstream.bench.corpus import COLLECTIONS, corpus_files, generate_oplog, oplog_bytes

__all__ = ["COLLECTIONS", "corpus_files", "generate_oplog", "oplog_bytes"]
