"""The fast path: change events written from the oplog's raw BSON, byte-identical to the reference.

Each module mirrors a reference one: ``pipeline`` (``FastShardPipeline``) is the twin of
:mod:`shardstream.transform.pipeline`, ``unwind_transaction`` of the stage of that name,
``update_description`` of :mod:`shardstream.transform.update.update_description`.
``fast_path_applies`` is the one gate: options the fast path does not cover keep the
reference path, and an entry it does not recognise is handed to the reference per entry.
``extended_json`` (the twin of :mod:`shardstream.transform.extended_json`) writes Extended
JSON from an event's bytes, its common case in C (``_ejson.c``).
"""

from __future__ import annotations

from shardstream.transform.raw.extended_json import bson_to_json
from shardstream.transform.raw.pipeline import FastShardPipeline, fast_path_applies

__all__ = ["FastShardPipeline", "bson_to_json", "fast_path_applies"]
