"""The sync's progress and control API, driven as a DBA would: a migration from copy to
commit through HTTP (and the CLI wrappers), Prometheus metrics, pause and resume, a
commit that fails and lifts the block, and the token the API needs beyond loopback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pymongo import MongoClient
from pymongo.errors import WriteError

from shardstream.cli.main import main
from shardstream.cluster_sync import NamespaceMap, SyncJob, SyncOptions, verify
from shardstream.cluster_sync.control_api import ControlApi
from shardstream.cluster_sync.migration import Migration
from shardstream.emulator import EmulatedCluster
from shardstream.errors import ConfigurationError
from tests.cluster_sync.static_source import static_source
from tests.sync_thread import SyncThread, wait_for

USER_WRITES_BLOCKED = 371


def call(url: str, method: str = "GET", token: str | None = None) -> tuple[int, Any]:
    """(HTTP status, decoded JSON or text) of one request."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            status, body = reply.status, reply.read()
            kind = reply.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        status, body, kind = exc.code, exc.read(), exc.headers["Content-Type"]
    return status, json.loads(body) if kind == "application/json" else body.decode()


class RunningMigration:
    """A source with data, a target, a running sync and its API."""

    def __init__(self, source: EmulatedCluster, target: EmulatedCluster, **options: Any):
        self.source, self.target = source, target
        self.source_client: MongoClient[Any] = MongoClient(source.uri)
        self.target_client: MongoClient[Any] = MongoClient(target.uri)
        self.source_client.shop.orders.insert_many([{"_id": n, "qty": n} for n in range(50)])
        options = {"idle_noop_interval_s": 0.2, **options}
        self.job = Migration(SyncOptions(source=source.uri, target=target.uri, **options))
        self.api = ControlApi(self.job, port=0).start()
        self.running = SyncThread(self.job.run)

    def progress(self) -> dict[str, Any]:
        status, document = call(f"{self.api.url}/api/v1/progress")
        assert status == 200
        assert isinstance(document, dict)
        return document

    def wait_state(self, state: str) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            if self.running.error is not None:
                raise self.running.error
            document = self.progress()
            return document if document["state"] == state else None

        return wait_for(reached, f"state {state}")

    def caught_up(self, count: int, events: int) -> dict[str, Any]:
        """Wait until the target holds ``count`` orders and the progress, measured after
        ``events`` applied events, reads lag 0 (the sample is up to a second old)."""

        def done() -> dict[str, Any] | None:
            if self.running.error is not None:
                raise self.running.error
            document = self.progress()
            if document["eventsApplied"] < events or document["lagTimeSeconds"] != 0:
                return None
            held = self.target_client.shop.orders.count_documents({})
            return document if held == count else None

        return wait_for(done, f"{count} orders on the target and lag 0")

    def close(self) -> None:
        self.job.stop()
        with contextlib.suppress(BaseException):
            self.running.join()
        self.api.stop()
        self.source_client.close()
        self.target_client.close()


@contextlib.contextmanager
def migration(**options: Any) -> Iterator[RunningMigration]:
    with static_source() as source, EmulatedCluster(shards=2) as target:
        running = RunningMigration(source, target, **options)
        try:
            yield running
        finally:
            running.close()


def test_a_migration_driven_through_the_api_from_copy_to_commit() -> None:
    with migration() as run:
        streaming = run.wait_state("STREAMING")
        assert streaming["documentsCopied"] == 50
        assert streaming["canCommit"] is True
        assert streaming["canWrite"] is False
        run.source_client.shop.orders.insert_many([{"_id": n, "qty": n} for n in range(50, 80)])
        caught_up = run.caught_up(80, events=30)
        assert caught_up["appliedClusterTime"]["t"] >= caught_up["sourceClusterTime"]["t"]
        assert set(caught_up["shards"]) == {shard.name for shard in run.source.shards}
        assert caught_up["syncId"] == "default"
        assert caught_up["error"] is None

        status, metrics = call(f"{run.api.url}/metrics")
        assert status == 200
        families = {family.name: family for family in text_string_to_metric_families(metrics)}
        applied = families["shardstream_sync_events_applied"].samples[0]
        assert applied.name == "shardstream_sync_events_applied_total"
        assert applied.value >= 30
        assert families["shardstream_sync_lag_seconds"].samples[0].value == 0
        states = {
            s.labels["shardstream_sync_state"]: s.value
            for s in families["shardstream_sync_state"].samples
        }
        assert states["STREAMING"] == 1
        assert states["COMMITTED"] == 0

        assert call(f"{run.api.url}/api/v1/commit", "POST") == (
            200,
            {"success": True, "state": "COMMITTING"},
        )
        committed = run.wait_state("COMMITTED")
        assert committed["canWrite"] is True
        assert committed["canCommit"] is False
        assert committed["lagTimeSeconds"] == 0
        result = run.running.join()
        assert result.caught_up
        with pytest.raises(WriteError) as refused:
            run.source_client.shop.orders.insert_one({"_id": 999})
        assert refused.value.code == USER_WRITES_BLOCKED
        assert verify(run.source.uri, run.target.uri).equal
        assert run.target_client.shop.orders.count_documents({}) == 80
        # The API stays up after the run, and refuses what no longer applies.
        status, refusal = call(f"{run.api.url}/api/v1/pause", "POST")
        assert status == 409
        assert "COMMITTED" in refusal["error"]


def test_pause_holds_the_stream_and_resume_applies_what_arrived_meanwhile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with migration() as run:
        run.wait_state("STREAMING")
        assert main(["sync", "pause", "--api", run.api.url]) == 0
        assert json.loads(capsys.readouterr().out) == {"success": True, "state": "PAUSED"}
        run.source_client.shop.orders.insert_many([{"_id": n} for n in range(50, 60)])
        with pytest.raises(AssertionError, match="timed out"):
            wait_for(
                lambda: run.target_client.shop.orders.count_documents({}) > 50,
                "anything applied while paused",
                timeout=1.5,
            )
        paused = run.progress()
        assert paused["state"] == "PAUSED"
        assert paused["canCommit"] is False
        assert main(["sync", "commit", "--api", run.api.url]) == 1  # refused while paused
        assert "PAUSED" in json.loads(capsys.readouterr().out)["error"]
        assert main(["sync", "resume", "--api", run.api.url]) == 0
        capsys.readouterr()
        run.caught_up(60, events=10)
        assert main(["sync", "status", "--api", run.api.url]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "STREAMING"
        assert main(["sync", "commit", "--api", run.api.url]) == 0  # waits for the end
        lines = capsys.readouterr().out.splitlines()
        assert json.loads(lines[-1])["state"] == "COMMITTED"


def test_a_commit_that_finds_a_difference_fails_and_leaves_the_source_writable() -> None:
    with migration() as run:
        run.wait_state("STREAMING")
        run.target_client.shop.orders.insert_one({"_id": "only on the target"})
        assert call(f"{run.api.url}/api/v1/commit", "POST")[0] == 200

        def failed() -> dict[str, Any] | None:
            document = run.progress()
            return document if document["error"] else None

        document = wait_for(failed, "the commit to fail")
        assert document["state"] == "STREAMING"
        assert "different" in document["error"]
        assert "writable again" in document["error"]
        run.source_client.shop.orders.insert_one({"_id": 50})  # not blocked any more
        run.target_client.shop.orders.delete_one({"_id": "only on the target"})
        run.caught_up(51, events=1)
        assert call(f"{run.api.url}/api/v1/commit", "POST")[0] == 200
        assert run.wait_state("COMMITTED")["error"] is None


def test_without_write_blocking_the_commit_leaves_the_source_writable() -> None:
    with migration(write_blocking=False) as run:
        run.wait_state("STREAMING")
        assert call(f"{run.api.url}/api/v1/commit", "POST")[0] == 200
        run.wait_state("COMMITTED")
        assert not any(shard.write_block.blocked for shard in run.source.shards)
        run.source_client.shop.orders.insert_one({"_id": 50})


def test_beyond_loopback_the_api_needs_a_token_and_refuses_requests_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = Migration(SyncOptions(source="mongodb://a/", target="mongodb://b/"))
    with pytest.raises(ConfigurationError, match="--api-token-file"):
        ControlApi(job, host="0.0.0.0", port=0)
    api = ControlApi(job, host="0.0.0.0", port=0, token="s3cret").start()
    try:
        url = api.url.replace("0.0.0.0", "127.0.0.1")
        for method, path in (
            ("GET", "/api/v1/progress"),
            ("POST", "/api/v1/pause"),
            ("GET", "/metrics"),
        ):
            assert call(f"{url}{path}", method)[0] == 401
            assert call(f"{url}{path}", method, token="wrong")[0] == 401
        assert job.control.state == "COPYING"  # nothing done
        assert call(f"{url}/api/v1/progress", token="s3cret")[0] == 200
        assert call(f"{url}/api/v1/pause", "POST", token="s3cret")[0] == 409  # still copying
        token_file = tmp_path / "token"
        token_file.write_text("s3cret\n")
        assert main(["sync", "status", "--api", url, "--api-token-file", str(token_file)]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "COPYING"
        assert main(["sync", "status", "--api", url]) == 1
        assert "401" in capsys.readouterr().err
    finally:
        api.stop()


def test_a_failed_run_reports_its_error_without_the_uris_password() -> None:
    job = SyncJob(
        SyncOptions(
            source="mongodb://admin:pa55word@127.0.0.1:9/",
            target="mongodb://b/",
            connect_timeout_s=0.2,
        )
    )
    with pytest.raises(Exception):  # noqa: B017, PT011 - what matters is what the API says
        job.run()
    document = job.progress()
    assert document["state"] == "FAILED"
    assert document["error"]
    assert "pa55word" not in json.dumps(document)


def test_the_wrappers_say_when_no_api_answers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "status", "--api", "http://127.0.0.1:9"]) == 1
    assert "expected a sync's API at http://127.0.0.1:9" in capsys.readouterr().err


class StderrLines:
    """A child's stderr lines, read on a thread so a wait can time out."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert process.stderr is not None
        stream = process.stderr
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()
        self._stream = stream

    def close(self) -> None:
        """After the child ended: the rest read, the pipe closed."""
        self._thread.join(timeout=30)
        self._stream.close()

    def first(self, prefix: str) -> str:
        return wait_for(
            lambda: next((line for line in self.lines if line.startswith(prefix)), None),
            f"a line starting {prefix!r} (so far: {self.lines})",
        )


def test_the_cli_serves_the_api_commits_through_the_wrapper_then_stops_on_ctrl_c() -> None:
    with static_source() as source, EmulatedCluster(shards=2) as target:
        client: MongoClient[Any] = MongoClient(source.uri)
        with client:
            client.shop.orders.insert_many([{"_id": n} for n in range(20)])
        command = [sys.executable, "-m", "shardstream", "sync", "--source", source.uri]
        process = subprocess.Popen(
            [*command, "--target", target.uri, "--api-port", "0", "--idle-noop-interval", "0.2"],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        stderr = StderrLines(process)
        try:
            url = stderr.first("sync API at ").split()[-1].strip()
            wait_for(
                lambda: call(f"{url}/api/v1/progress")[1]["state"] == "STREAMING",
                "the stream phase",
            )
            wrapper = [sys.executable, "-m", "shardstream", "sync", "commit", "--api", url]
            done = subprocess.run(wrapper, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout.splitlines()[-1])["canWrite"] is True
            stderr.first("sync committed")
            assert call(f"{url}/api/v1/progress")[1]["state"] == "COMMITTED"  # still served
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
            assert process.returncode == 0, stderr.lines
            assert any("caught up with the source" in line for line in stderr.lines)
        finally:
            process.kill()
            process.wait(timeout=30)
            stderr.close()


def _equal_both_ways(a: str, b: str) -> bool:
    return verify(a, b).equal and verify(b, a).equal


def test_a_reversible_migration_syncs_the_new_sources_writes_back_after_reverse() -> None:
    with migration(reversible=True) as run:
        run.wait_state("STREAMING")
        assert run.progress()["canReverse"] is False
        status, refusal = call(f"{run.api.url}/api/v1/reverse", "POST")
        assert status == 409
        assert "committed" in refusal["error"]
        assert call(f"{run.api.url}/api/v1/commit", "POST")[0] == 200
        committed = run.wait_state("COMMITTED")
        assert committed["canReverse"] is True
        assert committed["direction"] == "forward"
        # The application moved to the target: its writes land there only.
        orders = run.target_client.shop.orders
        orders.insert_one({"_id": "after the cutover"})
        orders.update_one({"_id": 7}, {"$set": {"qty": 700}})
        orders.delete_one({"_id": 8})
        assert call(f"{run.api.url}/api/v1/reverse", "POST") == (
            200,
            {"success": True, "state": "REVERSING"},
        )

        def reversed_and_streaming() -> dict[str, Any] | None:
            document = run.progress()
            if document["direction"] == "reverse" and document["state"] == "STREAMING":
                return document
            return None

        reverse = wait_for(reversed_and_streaming, "the reverse sync")
        assert reverse["syncId"] == "default-reverse"
        assert reverse["documentsCopied"] == 0  # no copy: it streams from the commit
        assert not any(shard.write_block.blocked for shard in run.source.shards)
        old_source = run.source_client.shop.orders
        wait_for(
            lambda: (
                old_source.find_one({"_id": "after the cutover"})
                and old_source.count_documents({}) == 50
            ),
            "the new source's writes on the old source",
        )
        assert old_source.find_one({"_id": 7}) == {"_id": 7, "qty": 700}
        assert _equal_both_ways(run.source.uri, run.target.uri)
        assert call(f"{run.api.url}/api/v1/reverse", "POST")[0] == 409  # once only


def test_sync_reverse_resumes_a_migration_committed_by_an_earlier_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with migration(reversible=True) as run:
        run.wait_state("STREAMING")
        assert call(f"{run.api.url}/api/v1/commit", "POST")[0] == 200
        run.wait_state("COMMITTED")
        run.job.stop()  # the committed process ends without a reverse
        run.running.join()
        run.target_client.shop.orders.insert_one({"_id": "later"})
        flags = ["--source", run.source.uri, "--target", run.target.uri]
        # The forward sync is over: running it again is refused, naming the way on.
        assert main(["sync", *flags]) == 1
        assert "--reverse" in capsys.readouterr().err
        quick = ["--idle-exit", "0.5", "--idle-noop-interval", "0.2"]
        assert main(["sync", *flags, "--reverse", *quick]) == 0, capsys.readouterr().err
        assert run.source_client.shop.orders.find_one({"_id": "later"}) == {"_id": "later"}
        assert _equal_both_ways(run.source.uri, run.target.uri)


def test_reversible_is_refused_with_map_rules() -> None:
    with pytest.raises(ConfigurationError, match="--reversible without --map"):
        SyncOptions(
            source="mongodb://a/",
            target="mongodb://b/",
            namespaces=NamespaceMap.from_options(None, None, ["shop=shop2"]),
            reversible=True,
        )
