"""``shardstream bench --uri URI --duration S``: live-tail latency, native stream and shardstream.

Both streams open at the cluster time "now", each in its own reader
(:mod:`shardstream.bench.tail`; ``readers="process"``: separate interpreters, so the
two readers and the writer do not share one GIL; ``"thread"``: all in this process),
at the same time, while a writer inserts ``write_rate`` documents a second for
``duration_s`` seconds through mongos into ``namespace``, each document carrying its
insert time ``sent`` (``time.time()``).  Latency = ``time.time()`` when the event leaves
the stream - ``sent``; also against the event's ``wallTime`` (the server's clock).

``write_rate=0``: this process does not write; another writer does (``python -m
shardstream.bench.emulated --write-rate N`` writes inside the emulator, spread over its
shards, where inserts through its mongos all land on the first shard). What was
written in the window is then counted through mongos (``find`` on ``sent``). A native stream
that cannot be opened (the emulator runs no ``$changeStream``) is reported unavailable with
the server's message. Credentials never reach the output.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import threading
import time
from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.bench.common import Fence, cluster_time, error_text, open_client
from shardstream.bench.emulated import BENCH_NAMESPACE
from shardstream.bench.latency_report import header, stream_report
from shardstream.bench.tail import TailSpec, tail
from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.oplog.redaction import password_of, redact_text

_OPEN_TIMEOUT_S = 120.0  # four spawned tailer processes on a busy 2-core box take seconds
_INSERTS_HINT = (
    "; if this mongos takes no insert, write inside the cluster (the emulator: "
    "`python -m shardstream.bench.emulated SHARDS 0 --write-rate N`) and bench with --write-rate 0"
)

# A bare emulated cluster is not a live one: its shards' oplogs start empty (a mongod's
# never is) and no periodic no-op moves an idle shard on (a mongod writes one every 10 s).
# With nothing logged it reports cluster time Timestamp(1, 1), which every later entry
# falls after (mongod's history check then fails, rightly), and a shard that never logs
# holds the others' events back for good.
_EMULATOR_NOTHING_LOGGED = Timestamp(1, 1)
_EMULATOR_HINT = (
    "an emulated cluster needs entries in its oplogs and periodic no-ops on its idle shards: "
    "serve it with `python -m shardstream.bench.emulated SHARDS 0 --noop-interval S` "
    "(in-process: shardstream.bench.emulated.preloaded_cluster)"
)


def measure_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`_measure_latency` with the options of :mod:`shardstream.cli.bench`."""
    if args.start_at_operation_time or args.since_seconds is not None:
        raise ConfigurationError(
            "expected --duration (live tail, from now) or a window start "
            "(--start-at-operation-time, --since-seconds), got both"
        )
    return _measure_latency(
        args.uri,
        write_rate=args.write_rate,
        duration_s=args.duration,
        namespace=args.namespace or BENCH_NAMESPACE,
        readers=args.readers,
        tailer=args.tailer,
        shard_collection=args.shard_collection,
        max_await_ms=args.max_await_ms,
        monitor_shards=not args.no_shard_monitor,
    )


def _measure_latency(
    uri: str,
    *,
    write_rate: float,
    duration_s: float,
    namespace: str = BENCH_NAMESPACE,
    readers: str = "process",
    tailer: str = "thread",
    shard_collection: bool = False,
    max_await_ms: int = 500,
    monitor_shards: bool = True,
    idle_timeout_s: float = 30.0,
) -> dict[str, Any]:
    """Run the live tail (see the module); the JSON report.

    Raises:
        ConfigurationError: bad arguments.
        ShardstreamError: the writer or shardstream's stream failed (the native one
            failing is reported, not raised); messages are redacted.
    """
    db, dot, coll = namespace.partition(".")
    if not (db and dot and coll):
        raise ConfigurationError(f"expected --namespace DB.COLL, got {namespace!r}")
    if write_rate < 0 or duration_s <= 0:
        raise ConfigurationError(
            f"expected --write-rate N >= 0 and --duration S > 0, got {write_rate}, {duration_s}"
        )
    if max_await_ms < 1:
        raise ConfigurationError(f"expected --max-await-ms MS with MS >= 1, got {max_await_ms}")
    if readers not in ("thread", "process"):
        raise ConfigurationError(f"expected --readers thread or process, got {readers!r}")
    client = open_client(uri)
    try:
        options = {
            "tailer": tailer,
            "max_await_ms": max_await_ms,
            "monitor_shards": monitor_shards,
            "idle_timeout_s": idle_timeout_s,
        }
        return _run(client, uri, (db, coll), write_rate, duration_s, readers, shard_collection,
                    options)  # fmt: skip
    except PyMongoError as exc:
        raise ShardstreamError(error_text(exc, uri)) from exc
    finally:
        client.close()


def _run(
    client: MongoClient[Any],
    uri: str,
    names: tuple[str, str],
    write_rate: float,
    duration_s: float,
    readers: str,
    shard_collection: bool,
    options: dict[str, Any],
) -> dict[str, Any]:
    namespace = ".".join(names)
    build = client.admin.command("buildInfo")
    emulated = build.get("gitVersion") == "shardstream-emulator"
    if shard_collection:  # hashed _id: the writer's inserts spread over every shard
        try:
            client.admin.command("enableSharding", names[0])
            client.admin.command("shardCollection", namespace, key={"_id": "hashed"})
        except PyMongoError as exc:
            raise ShardstreamError(f"--shard-collection failed: {error_text(exc, uri)}") from exc
    start = cluster_time(client)
    if emulated and start <= _EMULATOR_NOTHING_LOGGED:
        raise ShardstreamError(
            f"expected a cluster that has logged something, got cluster time {start} "
            f"from an emulator whose shards logged nothing: {_EMULATOR_HINT}"
        )
    specs = {
        kind: TailSpec(kind, uri, start, namespace, **options) for kind in ("shardstream", "native")
    }
    pool = _Readers(specs, readers)
    try:
        opened = pool.wait_opened()
        if "shardstream" not in opened:
            raise _ours_failed(pool.errors["shardstream"], emulated)
        t_open = time.time()
        collection = client[names[0]][names[1]]
        if write_rate > 0:
            written = _write(collection, write_rate, duration_s, t_open, uri)
        else:
            time.sleep(duration_s)  # another writer (the emulator's) inserts meanwhile
        t_end = time.time()
        if write_rate == 0:
            window = {"sent": {"$gte": t_open, "$lt": t_end}}
            written = [str(doc["_id"]) for doc in collection.find(window, {"_id": 1})]
        fence = Fence(cluster_time(client), t_open, t_end, len(set(written)))
        results = pool.finish(fence, options["idle_timeout_s"] + 60)
        now = cluster_time(client)
    finally:
        pool.close()
    if "shardstream" not in results:
        raise _ours_failed(pool.errors["shardstream"], emulated)
    streams = {
        kind: stream_report(results.get(kind), pool.errors.get(kind), set(written), fence, now)
        for kind in specs
    }
    report = {
        "uri": redact_text(uri, password_of(uri)),
        "server": "shardstream emulator" if emulated else f"MongoDB {build.get('version')}",
        "namespace": namespace,
        "writer": "this process" if write_rate > 0 else "external (counted through mongos)",
        "write_rate": write_rate,
        "duration_s": duration_s,
        "written": len(written),
        "achieved_write_rate": len(written) / max(t_end - t_open, 1e-9),
        "start": [start.time, start.inc],
        "end": [fence.cluster_time.time, fence.cluster_time.inc],
        "readers": readers,
        "tailer": options["tailer"],
        "max_await_ms": options["max_await_ms"],
        "shard_monitor": options["monitor_shards"],
    } | streams
    return {"header": header(report)} | report


def _ours_failed(error: str, emulated: bool) -> ShardstreamError:
    """Shardstream's stream failed: the reader's (redacted) error, with a hint for an emulator."""
    if emulated and "ChangeStreamHistoryLost" in error:
        error += f"; {_EMULATOR_HINT}"
    return ShardstreamError(f"shardstream stream failed: {error}")


def _write(collection: Any, rate: float, duration_s: float, t_open: float, uri: str) -> list[str]:
    """Insert at ``rate``/s until ``duration_s`` after ``t_open``; the ``_id``s written.

    Each round inserts the documents due by now in one ``insert_many``, so a slow round
    trip lowers the number of round trips, not the rate.  ``sent`` is taken just before
    the call: the latency includes the insert's own round trip, as an application's would.
    """
    written: list[str] = []
    while (now := time.time()) < t_open + duration_s:
        due = int((now - t_open) * rate) + 1 - len(written)
        if due > 0:
            documents = [{"sent": now} for _ in range(due)]
            try:
                collection.insert_many(documents, ordered=True)
            except PyMongoError as exc:
                raise ShardstreamError(
                    f"inserts through mongos failed: {error_text(exc, uri)}{_INSERTS_HINT}"
                ) from exc
            written += [str(document["_id"]) for document in documents]
        time.sleep(min(0.005, max(0.0, t_open + (len(written) / rate) - time.time())))
    return written


class _Readers:
    """The two readers, as threads or spawned processes, each with its pipe."""

    def __init__(self, specs: Mapping[str, TailSpec], how: str) -> None:
        self.errors: dict[str, str] = {}
        self._pipes: dict[str, Any] = {}
        self._workers: list[Any] = []
        context = multiprocessing.get_context("spawn")
        for kind, spec in specs.items():
            mine, theirs = context.Pipe()
            self._pipes[kind] = mine
            # Not daemonic: a process tailer starts processes of its own.
            worker: Any = (
                context.Process(target=tail, args=(spec, theirs), name=f"bench-{kind}")
                if how == "process"
                else threading.Thread(target=tail, args=(spec, theirs), daemon=True)
            )
            worker.start()
            self._workers.append(worker)

    def _receive(self, kind: str, timeout: float) -> tuple[str, Any]:
        pipe = self._pipes[kind]
        try:
            if pipe.poll(timeout):
                message: tuple[str, Any] = pipe.recv()
                return message
        except (EOFError, OSError):
            return ("error", "the reader ended without a report")
        return ("error", f"no answer from the reader within {timeout:.0f} s")

    def wait_opened(self) -> list[str]:
        """The kinds whose stream opened; the others' messages are in ``errors``."""
        opened = []
        for kind in list(self._pipes):
            status, detail = self._receive(kind, _OPEN_TIMEOUT_S)
            if status == "opened":
                opened.append(kind)
            else:
                self.errors[kind] = detail
                del self._pipes[kind]
        return opened

    def finish(self, fence: Fence, timeout: float) -> dict[str, Any]:
        """Send the fence to every open reader; their samples."""
        for pipe in self._pipes.values():
            # A reader that failed is gone; its error is still in the pipe, read below.
            with contextlib.suppress(OSError):
                pipe.send(("end", fence))
        results = {}
        for kind in self._pipes:
            status, detail = self._receive(kind, timeout)
            if status == "done":
                results[kind] = detail
            else:
                self.errors[kind] = detail
        return results

    def close(self) -> None:
        """Stop the readers still reading (after an error) and join them."""
        for pipe in self._pipes.values():
            with contextlib.suppress(OSError, ValueError):  # that reader is gone already
                pipe.send(("stop", None))
        for worker in self._workers:
            worker.join(30)
            if isinstance(worker, multiprocessing.process.BaseProcess) and worker.is_alive():
                worker.terminate()
                worker.join(5)
