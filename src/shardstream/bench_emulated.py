"""An emulated cluster preloaded with the seeded corpus, for ``shardstream bench --uri``.

``python -m shardstream.bench_emulated [SHARDS] [ENTRIES_PER_SHARD]`` starts an
:class:`~shardstream.emulator.EmulatedCluster` (mongos, config server, SHARDS
single-node shards; default 4 x 50,000 entries), preloads every shard with the corpus
of :mod:`shardstream.bench_corpus` (seed = shard number), prints the mongos URI and the
``--start-at-operation-time`` to bench from, and serves until its stdin closes or it is
interrupted.  Run it as its own process, so that its serving threads do not take the
GIL of the process being measured.  (The emulated mongos has no ``aggregate``: only
shardstream's side of the bench can run against it.)
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence

import bson
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.bench_corpus import oplog_bytes
from shardstream.emulator import EmulatedCluster

CORPUS_START = Timestamp(1_700_000_000, 1)  # the corpus's first ts
_RAW = bson.CodecOptions(document_class=RawBSONDocument)


def preload(cluster: EmulatedCluster, oplogs: Sequence[bytes]) -> Timestamp:
    """Append ``oplogs[n]`` (concatenated BSON) to shard n, then one no-op on every shard.

    The no-op, one second after the newest entry of any shard, is what a periodic
    no-op writer would log: every shard's promise passes the corpus's last ``ts``, so the
    last events leave the merge gate, and the cluster time (the end of a bench window)
    is that no-op's.  Everything is majority-committed.  Returns the no-op's ``ts``.
    """
    shards = cluster.shards
    if len(oplogs) != len(shards):
        raise ValueError(f"expected {len(shards)} oplogs (one per shard), got {len(oplogs)}")
    for shard, data in zip(shards, oplogs, strict=True):
        for entry in bson.decode_file_iter(io.BytesIO(data), _RAW):
            shard.append(entry)
    newest = max((shard.oplog.last_ts or CORPUS_START).time for shard in shards)
    end = Timestamp(newest + 1, 1)
    for shard in shards:
        shard.append({"op": "n", "ns": "", "o": {"msg": "periodic noop"}, "ts": end})
        shard.set_majority(end)
    return end


def main(argv: Sequence[str]) -> int:
    """Serve a preloaded cluster until stdin closes; print its URI and start time."""
    shards = int(argv[0]) if argv else 4
    entries = int(argv[1]) if len(argv) > 1 else 50_000
    with EmulatedCluster(shards=shards) as cluster:
        preload(cluster, [oplog_bytes(entries, seed=n) for n in range(shards)])
        start = f"{CORPUS_START.time},{CORPUS_START.inc}"
        sys.stdout.write(f"{cluster.uri} --start-at-operation-time {start}\n")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
