"""What every documentation page's examples run in: a directory, oplog files, clusters.

One :class:`PageEnvironment` per page, entered for the page's whole run:

- a fresh directory holding ``shard0.bson``, ``shard1.bson`` and ``shard2.bson``: the
  oplogs (concatenated BSON, as mongodump writes ``oplog.bson``) of a simulated 3-shard
  cluster, :data:`OPLOG_RUN`, the same bytes for every page and every run;
- for a page that needs them (:func:`needs_clusters`), two emulated 2-shard clusters: a
  source holding the whole simulated run :data:`SOURCE_RUN` (each shard's oplog from
  :data:`OPLOG_START` on, and the run's final documents) and an empty target; both stop
  when the page is done;
- the variables of :meth:`PageEnvironment.variables`, and the environment's ``PATH`` with
  this interpreter's ``bin`` first, so ``shardstream`` and ``python`` are the ones under test.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import sys
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import bson

from shardstream.emulator import EmulatedCluster
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.sim.emulated_source import SimulatedSource

OPLOG_RUN: Final = SimulationConfig(seed=7, shards=3, operations=300)
SOURCE_RUN: Final = SimulationConfig(seed=7, shards=2, operations=300)
# The simulator's clock starts here (2026-01-01T00:00:00Z), so a page can watch the
# source's whole oplog with --start-at-operation-time 1767225600,1.
OPLOG_START: Final = "1767225600,1"
CLUSTER_VARIABLES: Final = ("SHARDSTREAM_URI", "SHARDSTREAM_SOURCE_URI", "SHARDSTREAM_TARGET_URI")
# The variables by name, or the verbs that read them when their command line gives no URI.
_USES_CLUSTERS: Final = re.compile(
    r"SHARDSTREAM_|\bshardstream\s+(?:watch|sync|verify|ingest|bench)\b"
)


@functools.cache
def simulated_oplogs() -> dict[str, bytes]:
    """Each shard's oplog file name and bytes, simulated once per process."""
    result = SimulatedCluster(OPLOG_RUN).run()
    return {
        f"{shard}.bson": b"".join(bson.encode(entry) for entry in oplog)
        for shard, oplog in sorted(result.oplogs.items())
    }


def needs_clusters(sources: list[str]) -> bool:
    """Whether examples with these sources use the emulated clusters (start them only then)."""
    return any(_USES_CLUSTERS.search(source) for source in sources)


class PageEnvironment:
    """One page's directory, oplog files and, when asked for, its emulated clusters."""

    def __init__(self, directory: Path, *, clusters: bool) -> None:
        """Prepare (but not yet create) the environment in the empty ``directory``."""
        self.directory = directory
        self.source: SimulatedSource | None = SimulatedSource(SOURCE_RUN) if clusters else None
        self.target: EmulatedCluster | None = EmulatedCluster(shards=2) if clusters else None
        self.process_groups: list[int] = []  # every command's, killed with the page

    def __enter__(self) -> Self:
        """Write the oplog files and start the clusters."""
        for name, data in simulated_oplogs().items():
            (self.directory / name).write_bytes(data)
        if self.source is not None and self.target is not None:
            try:
                self.source.start()
                self.source.feed_rest()  # the whole run: the page starts from its end state
                self.target.start()
            except BaseException:
                self.__exit__(None, None, None)
                raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop what the page's commands left running (``cmd &``), then the clusters."""
        for group in self.process_groups:
            # Usually gone: a command rarely leaves anything behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        if self.source is not None and self.target is not None:
            self.source.stop()
            self.target.stop()

    def variables(self) -> dict[str, str]:
        """The environment the page's examples run with.

        This process's environment without any ``SHARDSTREAM_*`` variable it happens to
        have, plus ``PATH`` (this interpreter's ``bin`` first), ``COLUMNS=80`` (help text
        wraps the same everywhere), ``PYTHONUNBUFFERED=1`` (stdout and stderr interleave
        as on a terminal), ``EXAMPLES_DIR`` and, with clusters, their URIs.
        """
        variables = {k: v for k, v in os.environ.items() if not k.startswith("SHARDSTREAM_")}
        variables["PATH"] = os.pathsep.join(
            [str(Path(sys.executable).parent), variables.get("PATH", os.defpath)]
        )
        variables["COLUMNS"] = "80"
        variables["PYTHONUNBUFFERED"] = "1"
        variables["EXAMPLES_DIR"] = str(self.directory)
        if self.source is not None and self.target is not None:
            variables["SHARDSTREAM_URI"] = self.source.cluster.uri
            variables["SHARDSTREAM_SOURCE_URI"] = self.source.cluster.uri
            variables["SHARDSTREAM_TARGET_URI"] = self.target.uri
        return variables
