"""The offline engine: oplog files of several shards to the merged stream, as fast as it goes.

``engine`` runs a replay on the reference or the fast path; ``shard_workers`` spreads the
shards over worker processes, whose encoded batches come back through ``batch_pipe``
(shared memory).
"""

from __future__ import annotations

from shardstream.replay.engine import (
    reference_batches,
    reference_event_batches,
    write_bson_events,
)

__all__ = ["reference_batches", "reference_event_batches", "write_bson_events"]
