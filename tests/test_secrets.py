"""No password in any public object's repr or str, in log output, or in an error's chain.

Every public options and result type (the dataclasses ``shardstream.__all__`` and each
public module's ``__all__`` export, plus the option objects of modules without one) is
built with a password-bearing URI wherever it takes a string; the few that take no
connection data are listed with the reason. A sync that fails (unreachable target, a
target that is the source, a checkpoint of another source) runs with DEBUG logging on,
and its log text, its error's message, its ``__cause__`` / ``__context__`` chain and the
formatted traceback are searched for the password.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
import socket
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bson.timestamp import Timestamp
from pymongo.synchronous import auth

import shardstream
from shardstream.bench.tail import TailSpec
from shardstream.cli.main import main
from shardstream.cluster_sync import (
    ClusterUnreachable,
    NamespaceComparison,
    NamespaceMap,
    SyncJob,
    SyncOptions,
    SyncRefused,
    SyncResult,
    VerifyReport,
)
from shardstream.emulator import EmulatedCluster
from shardstream.oplog.live import ClusterInfo
from shardstream.oplog.live.discovery import ShardInfo
from shardstream.spark.ingest.settings import IngestSettings
from shardstream.spark.source.options import SourceKind, SourceSpec

PASSWORD = "s3cretPw"
SECRET_URI = f"mongodb://admin:{PASSWORD}@db1.example:27017,db2.example/?replicaSet=rs0"


def _builders() -> dict[type, Callable[[], object]]:
    """Each public type that may hold a URI, built with :data:`SECRET_URI` in it."""
    shard = ShardInfo("shard01", "rs1/db1:27018", "rs1", ("db1:27018",), SECRET_URI)
    options = SyncOptions(source=SECRET_URI, target=SECRET_URI.replace("db1", "dst"))
    return {
        SyncOptions: lambda: options,
        SyncJob: lambda: SyncJob(options),
        SyncResult: lambda: SyncResult(1, 2, 0, None, Timestamp(1, 1)),
        NamespaceMap: lambda: NamespaceMap.from_options("shop", None, ["shop=mirror"]),
        ClusterInfo: lambda: ClusterInfo((shard,), Timestamp(1, 1), shard, base_uri=SECRET_URI),
        ShardInfo: lambda: shard,
        VerifyReport: lambda: VerifyReport(()),
        # Option objects of modules without __all__ (the CLI builds them from --uri).
        IngestSettings: lambda: IngestSettings(
            table=Path("/lake"), source_options={"uri": SECRET_URI}, bounded=False
        ),
        SourceSpec: lambda: SourceSpec(kind=SourceKind.LIVE, uri=SECRET_URI),
        TailSpec: lambda: TailSpec("shardstream", SECRET_URI, Timestamp(1, 1), "shop.orders"),
    }


# Exported dataclasses that take no connection data, and why.
NO_CONNECTION_DATA: dict[str, str] = {
    "ChangeEvent": "an event built from oplog entries: documents and a token, no URI",
    "EncodedEvent": "the fast path's event bytes: no URI",
    "ChangeStreamOptions": "scope, start point and watch flags only: no URI field",
    "CollectionSpec": "a simulated collection's name and key",
    "MigrationRecord": "a simulated chunk migration",
    "SimulationConfig": "the simulator's knobs: numbers and names",
    "SimulationCounters": "the simulator's counts",
    "SimulationResult": "the simulator's oplogs and final data, no connection",
    "DBPointer": "a BSON value",
    "ResumeToken": "a resume token's bytes",
    "ResumeTokenData": "a decoded resume token",
    "RetryPolicy": "retry counts and backoff",
    "ShardChange": "a shard added or removed, by name and time",
    "TopologyBatch": "shard changes and a promise time",
    "NamespaceComparison": "a verify result: namespaces, counts and hashes",
    "LiveCluster": "opened by watch() on a live cluster: tailers and a closure, whose "
    "reprs are object reprs (checked through watch() below)",
}


def _exported_dataclasses() -> Iterator[tuple[str, type]]:
    """Every dataclass in ``shardstream.__all__`` or a public module's ``__all__``."""
    seen: set[type] = set()
    names = [name for name in shardstream.__all__ if name not in ("sync", "verify", "watch")]
    modules = [shardstream]
    for info in pkgutil.walk_packages(shardstream.__path__, "shardstream."):
        parts = info.name.split(".")
        if "emulator" in parts or any(part.startswith("_") for part in parts):
            continue  # the emulator is test equipment; underscored modules are private
        try:
            modules.append(importlib.import_module(info.name))
        except ImportError:
            continue  # an optional extra (Spark) that is not installed
    for module in modules:
        for name in getattr(module, "__all__", names if module is shardstream else []):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj not in seen:
                seen.add(obj)
                yield f"{module.__name__}.{name}", obj


def _all_text(exc: BaseException) -> str:
    """The error's message, every linked error's, and the formatted traceback."""
    texts = ["".join(traceback.format_exception(exc))]
    link: BaseException | None = exc
    for _ in range(20):  # bounded: chains are short
        if link is None:
            break
        texts.append(f"{link!s} {link!r}")
        link = link.__cause__ or link.__context__
    return "\n".join(texts)


def test_every_exported_dataclass_is_built_with_a_secret_or_listed_with_a_reason() -> None:
    builders = _builders()
    unchecked = [
        qualified
        for qualified, kind in _exported_dataclasses()
        if kind not in builders and kind.__name__ not in NO_CONNECTION_DATA
    ]
    assert unchecked == []


@pytest.mark.parametrize("kind", list(_builders()), ids=lambda kind: kind.__name__)
def test_no_public_object_shows_the_password(kind: type) -> None:
    built = _builders()[kind]()
    assert isinstance(built, kind)
    shown = f"{built!r}\n{built!s}\n{built}"
    assert PASSWORD not in shown
    if kind in (SyncOptions, IngestSettings, TailSpec):  # redacted, not dropped
        assert "admin:***@db1.example" in shown or "admin:***@dst.example" in shown


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_target_fails_in_one_line_without_the_password_in_logs_or_chain(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _closed_port()
    target = f"mongodb://admin:{PASSWORD}@127.0.0.1:{port}/"
    with EmulatedCluster(shards=1) as source, caplog.at_level(logging.DEBUG):
        secret_source = source.uri.replace("mongodb://", f"mongodb://admin:{PASSWORD}@")
        with pytest.MonkeyPatch.context() as patch:
            # The emulator does not authenticate: the driver is told to skip it, so the
            # credentials travel every path a real run's do.
            patch.setattr(auth, "authenticate", lambda *_args, **_kwargs: None)
            with pytest.raises(ClusterUnreachable) as caught:
                shardstream.sync(secret_source, target, connect_timeout_s=0.5)
            argv = ["sync", "--source", secret_source, "--target", target]
            code = main([*argv, "--connect-timeout", "0.5"])
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert "0.5 s" in message
    assert "admin:***@" in message
    assert PASSWORD not in _all_text(caught.value)
    assert PASSWORD not in caplog.text
    assert any(record.levelno == logging.DEBUG for record in caplog.records)  # it logged
    err = capsys.readouterr().err
    assert code == 1
    assert PASSWORD not in err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(
        "shardstream sync: error: cannot reach the target at mongodb://admin:***@"
    )
    assert f"127.0.0.1:{port}" in line
    assert "0.5 s" in line


def test_a_live_stream_and_its_logs_hold_no_password(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "authenticate", lambda *_args, **_kwargs: None)
    with EmulatedCluster(shards=2) as cluster, caplog.at_level(logging.DEBUG):
        secret = cluster.uri.replace("mongodb://", f"mongodb://admin:{PASSWORD}@")
        with shardstream.watch(secret, max_await_time_ms=50) as stream:
            assert stream.try_next() is None
            shown = f"{stream!r} {stream!s} {vars(stream)!r}"
    assert PASSWORD not in shown
    assert PASSWORD not in caplog.text


def test_a_refused_sync_and_its_chain_hold_no_password(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "authenticate", lambda *_args, **_kwargs: None)
    with EmulatedCluster(shards=1) as cluster, caplog.at_level(logging.DEBUG):
        secret = cluster.uri.replace("mongodb://", f"mongodb://admin:{PASSWORD}@")
        with pytest.raises(SyncRefused) as caught:
            shardstream.sync(secret, secret, maps=["shop=shop2"], idle_exit_s=0.1)
    assert PASSWORD not in _all_text(caught.value)
    assert PASSWORD not in caplog.text
    assert "admin:***@" in str(caught.value)


def test_comparisons_name_no_connection_data() -> None:
    # NamespaceComparison is built by verify(); a repr shows namespaces and counts only.
    fields = {field.name for field in dataclasses.fields(NamespaceComparison)}
    assert not {name for name in fields if "uri" in name or "host" in name}
