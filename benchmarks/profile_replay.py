"""Where the fast replay's time goes: cProfile of the merged fast path, one core.

Run: ``.venv/bin/python -m benchmarks.profile_replay [ENTRIES_PER_SHARD]`` (default 25000,
4 shards of the benchmark corpus, the files cached by replay_throughput).  Prints the
functions with the most own time; cProfile slows Python code more than C calls, so read
the shares, not the absolute times.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys

from benchmarks.replay_throughput import OPTIONS, corpus
from shardstream.bench.offline import replay_in_process


def main() -> None:
    per_shard = int(sys.argv[1]) if len(sys.argv) > 1 else 25_000
    shards = corpus(per_shard)
    profile = cProfile.Profile()
    profile.enable()
    replay_in_process(shards, OPTIONS)
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(14)
    print(out.getvalue())


if __name__ == "__main__":
    main()
