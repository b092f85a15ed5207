"""URIs from a file or the environment, so no password shows in ``ps`` (issue 28, item 8).

Every verb that takes a MongoDB URI (``sync``, ``verify``, ``watch``, ``ingest``, ``bench``)
also takes it from ``--source-file`` / ``--target-file`` / ``--uri-file`` or from
``SHARDSTREAM_SOURCE_URI`` / ``SHARDSTREAM_TARGET_URI`` / ``SHARDSTREAM_URI``, one source
per URI, with the flag's checks, and never prints a file's content or a password.

``sync`` and ``verify`` run against emulated clusters; ``watch``, ``bench`` and ``ingest``
are stopped where the URI is handed over (``shardstream.watch``, ``measure_live``, the
ingest's ``run_ingest``), so no test waits on a stream or starts Spark.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster
from shardstream.errors import OplogError, ShardstreamError
from tests.cluster_sync.static_source import contents, static_source

PASSWORD = "s3cr3t-pw"
# Nothing listens on port 1, and the driver gives up within 0.2 s.
UNREACHABLE = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200&connectTimeoutMS=200"
SECRET_UNREACHABLE = UNREACHABLE.replace("mongodb://", f"mongodb://alice:{PASSWORD}@")
SECRET_BAD_PORT = f"mongodb://alice:{PASSWORD}@127.0.0.1:notaport/"
ENV_NAMES = ("SHARDSTREAM_URI", "SHARDSTREAM_SOURCE_URI", "SHARDSTREAM_TARGET_URI")
ORDERS = [{"_id": n, "item": f"item-{n}"} for n in range(5)]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No URI variable from the shell running the tests."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def uri_file(directory: Path, uri: str, name: str = "uri") -> Path:
    """``uri`` in a file only its owner reads, with the whitespace an editor leaves around it."""
    path = directory / name
    path.write_text(f"  {uri}\n\n")
    path.chmod(0o600)
    return path


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str], verb: str) -> str:
    """Run ``argv``; assert exit 1 and one error line without a traceback; return it."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 1, captured
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"shardstream {verb}: error: "), line
    assert "Traceback" not in captured.out + captured.err
    return line


# --- each verb, the URI under test given three ways -------------------------------------------

# verb, the URI's flag (None: watch's positional URI), its file flag, its variable, and the
# rest of a command line that fails fast once the URI is taken.
VERBS = [
    pytest.param("sync", "--source", "--source-file", "SHARDSTREAM_SOURCE_URI", id="sync"),
    pytest.param("verify", "--target", "--target-file", "SHARDSTREAM_TARGET_URI", id="verify"),
    pytest.param("watch", None, "--uri-file", "SHARDSTREAM_URI", id="watch"),
    pytest.param("ingest", "--uri", "--uri-file", "SHARDSTREAM_URI", id="ingest"),
    pytest.param("bench", "--uri", "--uri-file", "SHARDSTREAM_URI", id="bench"),
]


def _rest(verb: str, flag: str | None, tmp_path: Path) -> list[str]:
    """The rest of ``verb``'s command line: the other URI of sync and verify, and so on."""
    if verb in ("sync", "verify"):
        other = "--target" if flag == "--source" else "--source"
        return [other, UNREACHABLE, "--connect-timeout", "0.2"]
    if verb == "ingest":
        return ["--table", str(tmp_path / "lake")]
    if verb == "bench":
        return ["--since-seconds", "10"]
    return ["--max-events", "1"]


def _with_flag(flag: str | None, uri: str) -> list[str]:
    return [uri] if flag is None else [flag, uri]


@pytest.mark.parametrize(("verb", "flag", "file_flag", "env"), VERBS)
def test_the_flag_and_its_file_together_are_refused_naming_both(
    verb: str,
    flag: str | None,
    file_flag: str,
    env: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = uri_file(tmp_path, SECRET_UNREACHABLE)
    argv = [
        verb,
        *_with_flag(flag, UNREACHABLE),
        file_flag,
        str(path),
        *_rest(verb, flag, tmp_path),
    ]
    if verb == "ingest":  # --uri-file sits in ingest's exclusive group of inputs
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert "argument --uri-file: not allowed with argument --uri" in capsys.readouterr().err
        return
    line = error_line(capsys, argv, verb)
    assert line.endswith(f"error: expected one of {flag or 'URI'} and {file_flag}, got both")


@pytest.mark.parametrize(("verb", "flag", "file_flag", "env"), VERBS)
@pytest.mark.parametrize(
    ("content", "verdict"),
    [
        pytest.param(None, "to name a readable file, got {path!r}: No such file", id="missing"),
        pytest.param("", "expected a URI in {flag} {path!r}, got an empty file", id="empty"),
        pytest.param(" \n\t\n", "expected a URI in {flag} {path!r}, got an empty file", id="blank"),
        pytest.param(
            f"{SECRET_UNREACHABLE}\n{UNREACHABLE}",
            "expected one line in {flag} {path!r}, got 2 lines",
            id="two-lines",
        ),
        pytest.param(
            PASSWORD,  # the password alone: the driver would take it for a host name
            "expected the URI in {flag} {path!r} to start with mongodb:// or mongodb+srv://",
            id="no-scheme",
        ),
        pytest.param(
            SECRET_BAD_PORT,
            "expected the URI in {flag} {path!r} as a MongoDB connection string",
            id="malformed",
        ),
    ],
)
def test_a_refused_file_is_one_line_naming_the_flag_and_path_never_the_content(
    verb: str,
    flag: str | None,
    file_flag: str,
    env: str,
    content: str | None,
    verdict: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "uri"
    if content is not None:
        path.write_text(content)
    argv = [verb, file_flag, str(path), *_rest(verb, flag, tmp_path)]
    line = error_line(capsys, argv, verb)
    assert verdict.format(flag=file_flag, path=str(path)) in line
    assert PASSWORD not in line
    assert "127.0.0.1" not in line  # nothing of the content, not even redacted


@pytest.mark.parametrize(("verb", "flag", "file_flag", "env"), VERBS)
def test_an_empty_or_malformed_variable_is_refused_without_its_value(
    verb: str,
    flag: str | None,
    file_flag: str,
    env: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [verb, *_rest(verb, flag, tmp_path)]
    monkeypatch.setenv(env, " ")
    assert error_line(capsys, argv, verb).endswith(f"expected a URI in {env}, got an empty value")
    monkeypatch.setenv(env, SECRET_BAD_PORT)
    line = error_line(capsys, argv, verb)
    assert f"expected the URI in {env} as a MongoDB connection string" in line
    assert "Port contains non-digit characters" in line  # the driver's reason stays
    assert PASSWORD not in line
    assert "notaport" not in line


@pytest.mark.parametrize(("verb", "flag", "file_flag", "env"), VERBS)
def test_a_password_from_a_file_or_the_variable_is_never_printed(
    verb: str,
    flag: str | None,
    file_flag: str,
    env: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if verb == "ingest":  # stopped before Spark starts, with the URI in the error
        _stop_ingest(monkeypatch, {}, error=RuntimeError(f"cannot reach {SECRET_UNREACHABLE}"))
    path = uri_file(tmp_path, SECRET_UNREACHABLE)
    rest = _rest(verb, flag, tmp_path)
    for argv in ([verb, file_flag, str(path), *rest], [verb, *rest]):
        monkeypatch.setenv(env, SECRET_UNREACHABLE)  # read only by the second command
        code = main(argv)
        captured = capsys.readouterr()
        assert code == 1, captured
        assert f"shardstream {verb}: error: " in captured.err
        assert PASSWORD not in captured.out + captured.err
        assert "Traceback" not in captured.err


# --- the URI reaches the command ---------------------------------------------------------------


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    with static_source() as cluster:
        cluster.shards[0].load_collection("shop.orders", ORDERS)
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=1) as cluster:
        yield cluster


def test_sync_takes_the_source_from_a_file_and_the_target_from_the_variable(
    source: EmulatedCluster,
    target: EmulatedCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SHARDSTREAM_TARGET_URI", target.uri)
    path = uri_file(tmp_path, source.uri)
    code = main(["sync", "--source-file", str(path), "--db", "shop", "--idle-exit", "0.3"])
    assert code == 0, capsys.readouterr().err
    src: MongoClient[Any] = MongoClient(source.uri)
    dst: MongoClient[Any] = MongoClient(target.uri)
    with src, dst:
        assert len(contents(dst, "shop", "orders")) == len(ORDERS)
        assert contents(dst, "shop", "orders") == contents(src, "shop", "orders")


def test_verify_takes_the_source_from_the_variable_and_the_target_from_a_file(
    source: EmulatedCluster,
    target: EmulatedCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SHARDSTREAM_SOURCE_URI", source.uri)
    path = uri_file(tmp_path, target.uri)
    # The target is empty: verify finds shop.orders missing there, so it did read both.
    assert main(["verify", "--target-file", str(path), "--db", "shop"]) == 1
    out = capsys.readouterr().out
    assert "shop.orders" in out
    target.shards[0].load_collection("shop.orders", ORDERS)
    assert main(["verify", "--target-file", str(path), "--db", "shop"]) == 0


def test_a_flag_beats_the_variable(
    source: EmulatedCluster,
    target: EmulatedCluster,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SHARDSTREAM_SOURCE_URI", SECRET_BAD_PORT)  # would be refused if read
    monkeypatch.setenv("SHARDSTREAM_TARGET_URI", SECRET_BAD_PORT)
    argv = ["verify", "--source", source.uri, "--target", source.uri, "--db", "shop"]
    assert main(argv) == 0, capsys.readouterr().err


@pytest.mark.parametrize("origin", ["file", "variable"])
def test_watch_hands_the_uri_to_the_stream(
    origin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def fake_watch(uri: str, **kwargs: Any) -> Any:
        seen.append(uri)
        raise OplogError("stopped by the test")

    monkeypatch.setattr("shardstream.stream.watch", fake_watch)
    argv = ["watch", "--max-events", "1"]
    if origin == "file":
        argv += ["--uri-file", str(uri_file(tmp_path, SECRET_UNREACHABLE))]
    else:
        monkeypatch.setenv("SHARDSTREAM_URI", f" {SECRET_UNREACHABLE}\n")
    assert main(argv) == 1
    assert main(["watch", UNREACHABLE]) == 1  # the positional URI still beats the variable
    assert seen == [SECRET_UNREACHABLE, UNREACHABLE]


@pytest.mark.parametrize("origin", ["file", "variable"])
def test_bench_hands_the_uri_to_the_live_mode(
    origin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shardstream.bench import latency, live

    seen: list[str] = []

    def measure_live(uri: str, **kwargs: Any) -> Any:
        seen.append(uri)
        raise ShardstreamError("stopped by the test")

    def measure_from_args(args: Any) -> Any:
        return measure_live(args.uri)

    monkeypatch.setattr(live, "measure_live", measure_live)
    monkeypatch.setattr(latency, "measure_from_args", measure_from_args)
    source = ["--uri-file", str(uri_file(tmp_path, UNREACHABLE))] if origin == "file" else []
    if origin == "variable":
        monkeypatch.setenv("SHARDSTREAM_URI", UNREACHABLE)
    assert main(["bench", *source, "--since-seconds", "5"]) == 1
    assert main(["bench", *source, "--duration", "1"]) == 1
    assert seen == [UNREACHABLE, UNREACHABLE]


def test_bench_reads_the_variable_only_for_a_live_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Exported for watch, the variable must not turn an offline bench into a live one.
    monkeypatch.setenv("SHARDSTREAM_URI", SECRET_BAD_PORT)  # would be refused if read
    argv = ["bench", "--entries", "20", "--shards", "1", "--repeats", "1", "--no-reference"]
    assert main(argv) == 0, capsys.readouterr().err
    monkeypatch.delenv("SHARDSTREAM_URI")
    line = error_line(capsys, ["bench", "--duration", "1"], "bench")
    assert "got no --uri (nor --uri-file or SHARDSTREAM_URI)" in line


def _stop_ingest(
    monkeypatch: pytest.MonkeyPatch, seen: dict[str, Any], *, error: Exception | None = None
) -> None:
    """Record the ingest's settings where Spark would start, then fail with ``error``."""
    from shardstream.spark.ingest import query, session

    def run_ingest(spark: Any, settings: Any, progress: Any) -> Any:
        seen["settings"] = settings
        raise error or ShardstreamError("stopped by the test")

    monkeypatch.setattr(session, "spark_session", lambda master, **_: contextlib.nullcontext())
    monkeypatch.setattr(query, "run_ingest", run_ingest)


@pytest.mark.parametrize("origin", ["file", "variable"])
def test_ingest_hands_the_uri_to_the_source_options(
    origin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    _stop_ingest(monkeypatch, seen)
    argv = ["ingest", "--table", str(tmp_path / "lake")]
    if origin == "file":
        argv += ["--uri-file", str(uri_file(tmp_path, SECRET_UNREACHABLE))]
    else:
        monkeypatch.setenv("SHARDSTREAM_URI", SECRET_UNREACHABLE)
    assert main(argv) == 1
    assert seen["settings"].source_options["uri"] == SECRET_UNREACHABLE
    assert seen["settings"].bounded is False  # a live cluster: runs until interrupted


def test_ingest_reads_the_variable_only_without_another_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    _stop_ingest(monkeypatch, seen)
    monkeypatch.setenv("SHARDSTREAM_URI", SECRET_BAD_PORT)  # would be refused if read
    assert main(["ingest", "--table", str(tmp_path / "lake"), "--simulate"]) == 1
    assert "uri" not in seen["settings"].source_options
    assert seen["settings"].source_options["simulate"] == "true"


# --- a URI given nowhere: the error a required flag gives --------------------------------------


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["watch"], ["URI", "--uri-file PATH", "SHARDSTREAM_URI"]),
        (["verify"], ["--source", "--source-file PATH", "SHARDSTREAM_SOURCE_URI", "--target"]),
        (["ingest", "--table", "lake"], ["--uri --uri-file --shard --simulate", "SHARDSTREAM_URI"]),
    ],
)
def test_a_uri_given_nowhere_is_a_usage_error(
    argv: list[str], names: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: shardstream ")
    assert "required" in err.splitlines()[-1]
    for name in names:
        assert name in err


def test_sync_without_uris_or_action_names_every_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sync"]) == 2
    err = capsys.readouterr().err
    assert "--source (or --source-file PATH, or SHARDSTREAM_SOURCE_URI)" in err
    assert "--target (or --target-file PATH, or SHARDSTREAM_TARGET_URI)" in err


@pytest.mark.parametrize(
    ("verb", "names"),
    [
        ("sync", ["--source-file", "SHARDSTREAM_SOURCE_URI", "--target-file"]),
        ("verify", ["--source-file", "SHARDSTREAM_TARGET_URI"]),
        ("watch", ["--uri-file", "SHARDSTREAM_URI"]),
        ("ingest", ["--uri-file", "SHARDSTREAM_URI"]),
        ("bench", ["--uri-file", "SHARDSTREAM_URI"]),
    ],
)
def test_the_help_names_the_file_flag_and_the_variable(
    verb: str, names: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    # argparse wraps the help; what matters is every name in it.
    text = " ".join(capsys.readouterr().out.split())
    for name in names:
        assert name in text
    assert "can see in ps" in text


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        pytest.param(b"mongodb://alice:\xff@h/", "expected UTF-8 text in", id="not-utf8"),
        pytest.param(b"mongodb://h/" + b" " * (64 << 10), "got more than 65536 bytes", id="huge"),
    ],
)
def test_a_file_that_is_no_text_line_is_refused_unread(
    data: bytes, verdict: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "uri"
    path.write_bytes(data)
    line = error_line(capsys, ["watch", "--uri-file", str(path)], "watch")
    assert verdict in line
    assert str(path) in line
    assert "alice" not in line
