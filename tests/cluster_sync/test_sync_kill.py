"""``shardstream sync`` killed with SIGKILL at seeded points, then run again with the same
command: it resumes from its checkpoint and the target still ends with the simulator's
true final data. Also the CLI's exit codes and ``verify``."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.emulator import EmulatedCluster, EmulatedNode, Stall
from shardstream.resume_token import decode_token_document
from shardstream.sim.apply_events import encoded_state
from shardstream.sim.emulated_source import SimulatedSource, cluster_state
from tests.cluster_sync.conftest import applied_through, checkpoint, wait_for

STALL_S = 60.0


def _sync(source: str, target: str, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "shardstream", "sync", "--source", source, "--target", target]
    return subprocess.Popen(
        [*command, "--copy-batch", "8", "--batch-size", "20", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)


def _seen(node: EmulatedNode, command: str) -> int:
    return node.commands_seen.count(command)


@pytest.mark.parametrize("seed", [1, 2])
def test_killed_in_the_copy_and_in_the_stream_it_resumes_to_the_same_result(
    source: SimulatedSource, target: EmulatedCluster, seed: int
) -> None:
    rng = random.Random(seed)
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        # Kill 1: in the copy, with a seeded number of copy batches through; the next
        # batch is held (faults are taken in order) so the kill lands before the copy ends.
        for _ in range(rng.randint(1, 4)):
            target.mongos.faults.add("insert", Stall(0.0))
        target.mongos.stall_next("insert", STALL_S)
        process = _sync(source.cluster.uri, target.uri)
        wait_for(lambda: not len(target.mongos.faults), "the held copy batch")
        _kill(process)
        stored = checkpoint(client)
        assert stored is not None
        assert stored["phase"] == "copy"
        # Kill 2: in the stream, after a seeded number of acknowledged batches.
        process = _sync(source.cluster.uri, target.uri)
        wait_for(lambda: (checkpoint(client) or {}).get("phase") == "stream", "phase 2")
        end = source.feed_rest()
        updates = _seen(target.mongos, "update") + rng.randint(2, 12)
        wait_for(lambda: _seen(target.mongos, "update") >= updates, "some stream batches")
        _kill(process)
        # Run to the end with the same command; it stops once idle.
        process = _sync(source.cluster.uri, target.uri, "--idle-exit", "2", "--verify")
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert out.splitlines()[-1] == "verify: equal"
        assert applied_through(client, end)
        assert cluster_state(client) == encoded_state(source.result.final_state)


def test_verify_exits_0_when_equal_and_1_naming_the_difference(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        process = _sync(source.cluster.uri, target.uri, "--idle-exit", "2")
        wait_for(lambda: (checkpoint(client) or {}).get("phase") == "stream", "phase 2")
        source.feed_rest()
        _out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert "sync stopped:" in err
        command = [sys.executable, "-m", "shardstream", "verify"]
        arguments = ["--source", source.cluster.uri, "--target", target.uri]
        equal = subprocess.run([*command, *arguments], capture_output=True, text=True, check=False)
        assert equal.returncode == 0, equal.stdout + equal.stderr
        assert equal.stdout.splitlines()[-1] == "verify: equal"
        client.shop.users.insert_one({"_id": "stray"})
        different = subprocess.run(
            [*command, *arguments], capture_output=True, text=True, check=False
        )
        assert different.returncode == 1
        assert "extra on target: 1 (e.g. _id 'stray')" in different.stdout


def test_credentials_in_the_uris_never_reach_the_output(target: EmulatedCluster) -> None:
    secret_uri = "mongodb://admin:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=200"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "shardstream",
            "sync",
            "--source",
            secret_uri,
            "--target",
            target.uri,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert "s3cret" not in result.stdout + result.stderr
    assert "shardstream sync:" in result.stderr


def test_ctrl_c_stops_after_the_batch_in_flight_is_acknowledged_and_checkpointed(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        process = _sync(source.cluster.uri, target.uri)
        wait_for(lambda: (checkpoint(client) or {}).get("phase") == "stream", "phase 2")
        # The stream's first transaction commit is held by the target: a batch is in
        # flight at Ctrl-C (only the stream commits transactions; checkpoints are updates).
        target.mongos.stall_next("commitTransaction", 2.0)
        end = source.feed_rest()
        wait_for(lambda: not len(target.mongos.faults), "a batch in flight")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert "stopping after the batch in flight" in err
        (summary,) = [line for line in err.splitlines() if line.startswith("sync stopped:")]
        # A stop behind the source exits 1 (the rest of the feed is usually still to
        # come after the batch in flight); caught up, 0.
        behind = "behind the source" in summary
        assert behind or "caught up with the source" in summary
        assert process.returncode == (1 if behind else 0), err
        stopped = checkpoint(client)
        assert stopped is not None
        # Nothing past the cut was there before the feed: the batch in flight was applied
        # and checkpointed before the sync stopped.
        assert decode_token_document(stopped["token"]).cluster_time > source.cut
        # The same command carries on from there to the end.
        process = _sync(source.cluster.uri, target.uri, "--idle-exit", "2")
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert applied_through(client, end)
        assert cluster_state(client) == encoded_state(source.result.final_state)
