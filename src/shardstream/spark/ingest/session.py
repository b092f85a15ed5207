"""Ingest: the SparkSession ``shardstream ingest`` starts (local by default).

Quiet (log4j at ERROR, no console progress bars, no UI: the ingest draws its own
progress line), UTC everywhere, the workers on this interpreter (they must import
shardstream and pyarrow), and few shuffle partitions: a micro-batch is small.
:func:`jvm_exited` tells an error of a JVM that died (out of memory, killed) from one it
raised.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from shardstream.errors import ConfigurationError
from shardstream.spark.ingest.spark_home import use_workers_spark_home
from shardstream.spark.source.option_values import format_byte_size, parse_byte_size

# Spark's driver refuses to start below 450 MiB of heap ("System memory ... must be at
# least 471859200"); the next round size, so the refusal is ours and says what to do.
MIN_DRIVER_MEMORY: Final = 512 << 20
_LOG4J: Final = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def driver_memory_setting(text: str | None) -> str | None:
    """``--driver-memory`` as Spark reads ``spark.driver.memory`` (whole MiB), or None.

    Raises:
        ConfigurationError: not a size, or below what Spark starts with.
    """
    if text is None:
        return None
    size = parse_byte_size("--driver-memory", text)
    if size < MIN_DRIVER_MEMORY:
        raise ConfigurationError(
            f"expected --driver-memory of at least {format_byte_size(MIN_DRIVER_MEMORY)} "
            f"(Spark refuses to start with less than 450m), got {text!r:.40}"
        )
    return f"{size >> 20}m"


@contextlib.contextmanager
def spark_session(
    master: str, *, app_name: str = "shardstream-ingest", driver_memory: str | None = None
) -> Iterator[Any]:
    """A SparkSession for an ingest: the active one if there is one, else a new one.

    ``driver_memory`` (``spark.driver.memory``, e.g. ``"2048m"``) applies to a JVM started
    here only: one this process started before keeps its heap.  Only a session started
    here is stopped on exit (a caller's own session, e.g. a test suite's, stays up).  The
    caller's session counts from any thread: pyspark's "active" session is per thread, and
    a command run on a worker thread would otherwise take the caller's session from
    ``getOrCreate`` as its own and stop it.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        yield SparkSession.active()
        return
    session = build_session(master, app_name=app_name, driver_memory=driver_memory)
    try:
        yield session
    finally:
        session.stop()


def build_session(
    master: str, *, app_name: str = "shardstream-ingest", driver_memory: str | None = None
) -> Any:
    """Start a SparkSession for an ingest (or get the running one, as ``getOrCreate``).

    Args:
        master: Spark's master URL, e.g. ``local[2]`` or ``local[*]``.
        app_name: the Spark application name.
        driver_memory: ``spark.driver.memory`` for the JVM this starts (None: Spark's
            default, 1g); pyspark passes it to the JVM it launches.
    """
    from pyspark.sql import SparkSession

    # pyspark's launcher and its Python data-source workers read these from the
    # environment (the spark.pyspark.python setting does not reach the data-source
    # planner): without them the workers run `python3` from PATH, which need not have
    # shardstream or pyarrow.  A caller's own values win.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    config_dir = Path(tempfile.mkdtemp(prefix="shardstream-spark-"))
    use_workers_spark_home(config_dir)  # read by the JVM this may start
    log4j = config_dir / "log4j2.properties"
    log4j.write_text(_LOG4J)
    cores = _cores(master)
    builder = SparkSession.builder
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    session = (
        builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def _cores(master: str) -> int:
    """The task slots a ``local[N]`` master gives (2 for anything else)."""
    inside = master.partition("[")[2].partition("]")[0].partition(",")[0]
    return int(inside) if inside.isdigit() else 2


def jvm_exited(exc: BaseException) -> bool:
    """Whether ``exc`` says the driver lost its JVM: py4j's connection to it failed, or a
    call got no answer and the JVM's process has exited."""
    from py4j.protocol import Py4JError, Py4JNetworkError  # type: ignore[import-untyped]
    from pyspark import SparkContext

    if isinstance(exc, ConnectionError | Py4JNetworkError):
        return True
    if not isinstance(exc, Py4JError):
        return False
    # A Java exception (Py4JJavaError is one) comes from a live JVM; an unanswered call
    # may come from a dead one, which only its process can tell.
    process = getattr(SparkContext._gateway, "proc", None)
    return process is not None and process.poll() is not None
