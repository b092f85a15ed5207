"""``shardstream bench --duration`` on the emulator with a stand-in for the native stream.

Run: ``.venv/bin/python -m benchmarks.live_tail_two_readers [--rate N] [BENCH ARGS...]``
(e.g. ``--readers process --no-shard-monitor``): starts ``python -m
shardstream.bench.emulated 4 0 --write-rate N`` (default 1000) in its own process, then
``shardstream bench --uri URI --duration 10 --write-rate 0 ARGS``.

The emulated mongos runs no ``$changeStream``, so the bench's native row would be unavailable
and only one stream would be read: nothing would show whether two concurrent readers
slow each other down in threads (one GIL) or not in processes.  Here the "native" row is
**a second shardstream stream** (``MongoClient.watch`` replaced by ``shardstream.watch``,
patched at import, so a spawned reader process, which imports this module again as
``__mp_main__``, is patched too; with the bench's ``--no-shard-monitor`` it runs without
its monitor too).  Its figures are shardstream's, not mongos's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from pymongo import MongoClient

import shardstream
from shardstream.cli.main import main as cli

_NO_MONITOR = "SHARDSTREAM_BENCH_STAND_IN_NO_MONITOR"


def _stand_in(client: MongoClient[Any], **options: Any) -> Any:
    host, port = client.address or ("127.0.0.1", 27017)
    # As the bench's own shardstream stream; an environment variable reaches spawned readers.
    monitor = os.environ.get(_NO_MONITOR) != "1"
    return shardstream.watch(f"mongodb://{host}:{port}/", monitor_shards=monitor, **options)


MongoClient.watch = _stand_in  # type: ignore[assignment,method-assign]


def main(argv: list[str]) -> int:
    os.environ[_NO_MONITOR] = "1" if "--no-shard-monitor" in argv else "0"
    rate = "1000"
    if argv[:1] == ["--rate"]:
        rate, argv = argv[1], argv[2:]
    emulator = subprocess.Popen(
        [sys.executable, "-m", "shardstream.bench.emulated", "4", "0", "--write-rate", rate],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert emulator.stdout is not None
        uri = emulator.stdout.readline().split()[0]
        print("native row = a second shardstream stream (stand-in), not mongos's")
        return cli(["bench", "--uri", uri, "--duration", "10", "--write-rate", "0", *argv])
    finally:
        assert emulator.stdin is not None
        emulator.stdin.close()  # the emulator serves until its stdin closes
        emulator.wait(30)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
