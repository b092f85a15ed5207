"""``shardstream ingest`` argument handling, without starting Spark."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

import pytest

from shardstream.cli.ingest import CRASH_ENV, _crash_point, source_options
from shardstream.cli.main import _build_parser, main
from shardstream.spark.delta.sink import CrashPoint


def _args(*argv: str) -> argparse.Namespace:
    return _build_parser().parse_args(["ingest", "--table", "lake", *argv])


def test_simulated_input_and_stream_options_become_source_options() -> None:
    options = source_options(
        _args(
            "--simulate",
            "--shards",
            "4",
            "--seed",
            "9",
            "--db",
            "shop",
            "--show-expanded-events",
            "--start-at-operation-time",
            "1700000000,1",
            "--max-events-per-batch",
            "500",
            "--max-bytes-per-batch",
            "16m",
            "--partition-mode",
            "perShard",
        )
    )
    assert options == {
        "simulate": "true",
        "shards": "4",
        "seed": "9",
        "db": "shop",
        "serverVersion": "8.2",
        "startAtOperationTime": "1700000000,1",
        "showExpandedEvents": "true",
        "maxEventsPerTrigger": "500",
        "maxBytesPerTrigger": str(16 << 20),
        "partitionMode": "perShard",
    }


def test_batches_are_capped_by_size_by_default() -> None:
    assert source_options(_args("--simulate"))["maxBytesPerTrigger"] == str(64 << 20)


def test_oplog_files_join_as_one_option() -> None:
    options = source_options(
        _args("--shard", "a=/x/a.bson", "--shard", "b=/x/b.jsonl", "--input-format", "ejson")
    )
    assert options["oplog"] == "a=/x/a.bson,b=/x/b.jsonl"
    assert options["inputFormat"] == "ejson"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shard", "a=x", "--shards", "2"], "expected --shards/--entries/--seed only with"),
        (["--simulate", "--input-format", "bson"], "expected --input-format only with --shard"),
        (["--shard", "nameonly"], "expected --shard NAME=PATH"),
        (["--simulate", "--max-events-per-batch", "0"], "expected --max-events-per-batch >= 1"),
        (["--simulate", "--optimize-every", "-1"], "expected --optimize-every N with N >= 0"),
        (["--simulate", "--max-bytes-per-batch", "lots"], "expected --max-bytes-per-batch as a"),
        (["--simulate", "--max-bytes-per-batch", "0k"], "expected --max-bytes-per-batch as a"),
        (["--simulate", "--mirror-workers", "-1"], "expected --mirror-workers N with N >= 0"),
        (["--simulate", "--driver-memory", "lots"], "expected --driver-memory as a size"),
        (["--simulate", "--driver-memory", "300m"], "expected --driver-memory of at least 512m"),
        (["--simulate", "--show-raw-update-description"], "a replay-only server flag"),
        (["--simulate", "--max-columns", "-1"], "expected --max-columns N with N >= 0"),
        (
            ["--simulate", "--mirror-layout", "single", "--no-history"],
            "expected --no-history and --max-columns only with --mirror-layout collections",
        ),
        (
            ["--simulate", "--no-mirror", "--lenient-mirror", "--mirror-workers", "2"],
            "expected no mirror option with --no-mirror, got --mirror-workers, --lenient-mirror",
        ),
        (
            ["--uri", "mongodb://h:27017", "--no-mirror", "--snapshot"],
            "expected no mirror option with --no-mirror, got --snapshot",
        ),
        (
            ["--simulate", "--mirror-layout", "single", "--mirror-buckets", "8"],
            "expected --mirror-buckets only with --mirror-layout collections or bucketed",
        ),
        (
            ["--simulate", "--mirror-layout", "bucketed", "--mirror-buckets", "0"],
            "expected --mirror-buckets B with 1 <= B <= 65536, got 0",
        ),
        (
            ["--uri", "mongodb://h:27017", "--mirror-layout", "bucketed", "--snapshot"],
            "expected neither --snapshot nor --mirror-workers with --mirror-layout bucketed",
        ),
        (
            ["--simulate", "--mirror-layout", "bucketed", "--mirror-workers", "2"],
            "expected neither --snapshot nor --mirror-workers with --mirror-layout bucketed",
        ),
        (
            ["--simulate", "--mirror-layout", "bucketed", "--max-columns", "3"],
            "expected --no-history and --max-columns only with --mirror-layout collections",
        ),
    ],
)
def test_bad_arguments_fail_before_spark_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["ingest", "--table", str(tmp_path), *argv]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "changelog").exists()


def test_credentials_never_reach_the_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", "--table", "t", "--uri", "mongodb://u:s3cret@h/", "--seed", "1"]) == 1
    err = capsys.readouterr().err
    assert "expected --shards/--entries/--seed only with --simulate, got them with --uri" in err
    assert "s3cret" not in err


def test_inputs_are_exclusive_and_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["ingest", "--table", "t"])
    with pytest.raises(SystemExit):
        main(["ingest", "--table", "t", "--simulate", "--shard", "a=b"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_crash_hook_format() -> None:
    assert _crash_point(None) is None
    assert _crash_point("between-commits:2") == (CrashPoint.BETWEEN_COMMITS, 2)
    with pytest.raises(ValueError, match=f"expected {CRASH_ENV} as <in-batch"):
        _crash_point("somewhere:1")


def test_a_source_failure_is_one_line_naming_the_python_error() -> None:
    from shardstream.cli.ingest import spark_error_summary
    from shardstream.oplog.redaction import redact_text

    message = (
        "[STREAM_FAILED] Query [id = fb75] terminated with exception: "
        "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source "
        "perform latestOffset: Traceback (most recent call last):\n"
        '  File "/x/live_source.py", line 298, in next_batch\n'
        "shardstream.errors.ChangeStreamHistoryLost: shard 'shard00' "
        "(mongodb://app:s3cret@127.0.0.1:51587/?replicaSet=shard00): the oplog no longer "
        "reaches Timestamp(1700000000, 1)\n"
        "\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.run(X.scala:1)"
    )
    line = redact_text(spark_error_summary(message))
    assert line.startswith("ChangeStreamHistoryLost: shard 'shard00' (mongodb://app:***@")
    assert "s3cret" not in line
    assert spark_error_summary("plain failure\nmore") == "plain failure"


@pytest.mark.parametrize("lost", [ConnectionRefusedError(111, "refused"), "py4j"])
def test_a_jvm_that_died_is_named_with_what_to_do(
    lost: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # What a driver sees when the JVM under it died (a batch past its memory): py4j's
    # connection fails, with no word from Spark about why.
    from py4j.protocol import Py4JNetworkError

    from shardstream.spark.ingest import query, session

    error = Py4JNetworkError("Answer from Java side is empty") if lost == "py4j" else lost

    def dying(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(session, "spark_session", lambda master, **_: contextlib.nullcontext())
    monkeypatch.setattr(query, "run_ingest", dying)
    assert main(["ingest", "--table", str(tmp_path), "--simulate"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shardstream ingest: error: Spark's JVM exited during the run")
    assert "--max-bytes-per-batch" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("exited", [True, False])
def test_an_unanswered_call_is_a_dead_jvm_only_if_its_process_exited(
    exited: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    from shardstream.spark.ingest import query, session

    class Process:
        def poll(self) -> int | None:
            return 137 if exited else None

    class Gateway:
        proc = Process()

    def unanswered(*args: Any, **kwargs: Any) -> Any:
        raise Py4JError("An error occurred while calling o42.awaitTermination")

    monkeypatch.setattr(SparkContext, "_gateway", Gateway())
    monkeypatch.setattr(session, "spark_session", lambda master, **_: contextlib.nullcontext())
    monkeypatch.setattr(query, "run_ingest", unanswered)
    assert main(["ingest", "--table", str(tmp_path), "--simulate"]) == 1
    err = capsys.readouterr().err
    assert ("Spark's JVM exited during the run" in err) == exited
    assert err.startswith("shardstream ingest: error: ")


def test_driver_memory_reaches_the_session_in_whole_mebibytes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from shardstream.errors import ShardstreamError
    from shardstream.spark.ingest import query, session

    seen: dict[str, Any] = {}

    def recording(master: str, **kwargs: Any) -> Any:
        seen.update(kwargs, master=master)
        return contextlib.nullcontext()

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise ShardstreamError("stopped by the test")

    monkeypatch.setattr(session, "spark_session", recording)
    monkeypatch.setattr(query, "run_ingest", stop)
    argv = ["ingest", "--table", str(tmp_path), "--simulate", "--master", "local[1]"]
    assert main([*argv, "--driver-memory", "2g"]) == 1
    assert seen == {"master": "local[1]", "driver_memory": "2048m"}
    assert main(argv) == 1
    assert seen["driver_memory"] is None  # Spark's own default
    assert "stopped by the test" in capsys.readouterr().err
