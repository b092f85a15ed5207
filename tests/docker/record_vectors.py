"""Record a real cluster's run: each shard's oplog and mongos's own events, and replay it.

Usage (needs Docker and the dev extra)::

    .venv/bin/python -m tests.docker.record_vectors /tmp/run-8.0 --image mongo:8.0

It starts the 2-shard cluster of the Docker tests, runs their workload through mongos,
and writes to the output directory:

* ``<shard>.bson``: the shard's ``local.oplog.rs`` from the stream's start, as
  concatenated BSON (what ``shardstream replay --shard NAME=PATH`` reads);
* ``native.jsonl``: the events of mongos's ``watch()`` from the same start, one canonical
  Extended JSON object per line;
* ``meta.json``: the image, the start time, and where the run came from.

:func:`replay_recorded` merges the saved oplogs as ``shardstream replay`` would;
``tests/docker/test_recorded_replay.py`` records a run into a temporary directory and
requires the replay to equal ``native.jsonl`` line for line (canonical Extended JSON,
``_id`` bytes included). Such a recording is the mongod/mongos output only Docker can
produce here; none is committed (no Docker engine on the development machines).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import bson
from bson import json_util
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import MongoClient

import shardstream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.resume_token.token_json import JSON_OPTIONS
from shardstream.transform.extended_json import event_to_json
from tests.docker.sharded_cluster import sharded_cluster
from tests.docker.workload import read_until, run_workload


def record(out: Path, image: str) -> None:
    """Run the workload on a fresh cluster and save the vector under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with sharded_cluster(image) as cluster, MongoClient(cluster.uri) as client:
        start = client.admin.command("ping")["operationTime"]
        run_workload(client)
        with client.watch(start_at_operation_time=start) as native:
            events = read_until(native, "last")
        shards = client.admin.command("listShards")["shards"]
        for shard, uri in zip(shards, cluster.shard_uris, strict=False):
            _save_oplog(uri, start, out / f"{shard['_id']}.bson")
    lines = [json_util.dumps(event, json_options=JSON_OPTIONS) for event in events]
    (out / "native.jsonl").write_text("\n".join(lines) + "\n")
    meta = {
        "image": image,
        "start": {"t": start.time, "i": start.inc},
        "source": f"recorded by tests/docker/record_vectors.py from a {image} 2-shard cluster",
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def replay_recorded(run: Path) -> list[str]:
    """The merged stream of ``run``'s saved oplogs from its start, one canonical line each."""
    meta = json.loads((run / "meta.json").read_text())
    start = Timestamp(meta["start"]["t"], meta["start"]["i"])
    sources = {path.stem: FileOplogSource(path.stem, str(path)) for path in run.glob("*.bson")}
    with shardstream.watch(sources, start_at_operation_time=start) as stream:
        return [event_to_json(event) for event in stream]


def _save_oplog(uri: str, start: Any, path: Path) -> None:
    raw = bson.codec_options.CodecOptions(document_class=RawBSONDocument)
    with MongoClient(uri) as shard:
        oplog = shard.get_database("local", codec_options=raw)["oplog.rs"]
        with path.open("wb") as sink:
            for entry in oplog.find({"ts": {"$gte": start}}).sort("$natural", 1):
                sink.write(entry.raw)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the directory to write")
    parser.add_argument("--image", default="mongo:8.0")
    args = parser.parse_args()
    record(args.out, args.image)


if __name__ == "__main__":
    main()
