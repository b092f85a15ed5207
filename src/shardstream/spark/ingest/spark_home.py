"""A ``SPARK_HOME`` whose Python workers import pyspark with its compiled bytecode.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on every Python
worker's path.  With pip's pyspark, ``SPARK_HOME`` is the installed package itself, and
that zip holds the same pyspark as source only: zipimport neither reads nor writes
bytecode caches, so every worker Spark starts compiled pyspark's modules again, ~0.5-0.9
CPU-seconds each (measured with ``python -c "import pyspark.worker"`` with and without
the zip on the path).  A query starts five kinds of them one after another on the driver
(the data source's lookup, creation and read planning, the streaming source's runner,
the tasks' daemon), which put several seconds on ``make demo``'s first batch.

:func:`workers_spark_home` builds, in a directory of the session's, a home made of links
to the installed package's entries (``bin``, ``jars`` ...) with an empty
``python/lib``: the workers' path then names zips that do not exist, and they import the
installed pyspark and py4j, the very files the zips were made from, with their ``.pyc``.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Final

_WORKER_ZIPS: Final = Path("python") / "lib"


def use_workers_spark_home(directory: Path) -> None:
    """Point ``SPARK_HOME`` at :func:`workers_spark_home` for a JVM started after this,
    unless the environment names a home of its own (a caller's Spark wins)."""
    spec = importlib.util.find_spec("pyspark")
    if "SPARK_HOME" in os.environ or spec is None or spec.origin is None:
        return
    try:
        home = workers_spark_home(directory, Path(spec.origin).parent)
    except OSError:  # no symbolic links here: Spark's own home, its workers slower to start
        return
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)


def workers_spark_home(directory: Path, home: Path) -> Path | None:
    """A home under ``directory`` in place of pip's pyspark installed at ``home`` (None: it
    is not laid out as pip installs it, or has no zip to hide; its home is then used as it
    is)."""
    if not (
        (home / "bin" / "spark-submit").is_file()
        and (home / "jars").is_dir()
        and (home / _WORKER_ZIPS / "pyspark.zip").is_file()
    ):
        return None
    shadow = directory / "spark-home"
    _link_entries(home, shadow, skip=_WORKER_ZIPS.parts[0])
    _link_entries(home / _WORKER_ZIPS.parts[0], shadow / _WORKER_ZIPS.parts[0], skip="lib")
    (shadow / _WORKER_ZIPS).mkdir()
    return shadow


def _link_entries(source: Path, target: Path, *, skip: str) -> None:
    target.mkdir()
    for entry in source.iterdir():
        if entry.name != skip:
            (target / entry.name).symlink_to(entry)
