"""One oplog through every path of ``shardstream replay``, for input-rule tests.

Each path is run through the command line's ``main(argv)``; its verdict is the exit code,
the output (concatenated BSON events, or Extended JSON lines) and stderr.  The paths:

* ``fast``: one BSON file, ``--output-format bson`` (the raw fast path);
* ``fast-json``: the same file to Extended JSON (the fast path, then the JSON writer);
* ``reference``: the same entries as Extended JSON lines, ``--output-format bson``
  (the reference pipeline, which reads such files);
* ``expanded``: the BSON file with ``--show-expanded-events`` (the reference pipeline);
* ``merge``: the file as shard ``a`` of two (``b``: :func:`other_shard`), fast path;
* ``workers``: the same merge with ``--workers 2`` (shard ``b`` in a worker process);
* ``merge-reference``: the merge of both as Extended JSON lines (the reference merge).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.cli.main import main
from tests import factories as make

SINGLE_PATHS = ("fast", "fast-json", "reference", "expanded")
MERGE_PATHS = ("merge", "workers", "merge-reference")
ALL_PATHS = SINGLE_PATHS + MERGE_PATHS


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What one path made of the input."""

    code: int
    out: bytes
    err: str

    @property
    def message(self) -> str:
        """stderr, which must be one line when the run failed."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


def write_oplog(directory: Path, name: str, entries: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``entries`` as ``<name>.bson`` and ``<name>.jsonl``; return the BSON path."""
    bson_path = directory / f"{name}.bson"
    bson_path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    lines = [
        json_util.dumps(entry, json_options=json_util.CANONICAL_JSON_OPTIONS) for entry in entries
    ]
    (directory / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))
    return bson_path


def other_shard() -> list[dict[str, Any]]:
    """Shard ``b`` of the merges: two inserts around everything the tests write at t=10."""
    return [
        make.insert(Timestamp(1, 1), {"_id": ObjectId("65f0000000000000000000b1")}),
        make.insert(Timestamp(100, 1), {"_id": ObjectId("65f0000000000000000000b2")}),
    ]


def argv_for(path: str, bson_path: Path, other: Path) -> list[str]:
    """The ``replay`` arguments of ``path`` for the oplog at ``bson_path``."""
    jsonl = bson_path.with_suffix(".jsonl")
    other_jsonl = other.with_suffix(".jsonl")
    bson_out = ["--output-format", "bson"]
    return {
        "fast": ["replay", str(bson_path), *bson_out],
        "fast-json": ["replay", str(bson_path)],
        "reference": ["replay", str(jsonl), *bson_out],
        "expanded": ["replay", str(bson_path), "--show-expanded-events", *bson_out],
        "merge": ["replay", "--shard", f"a={bson_path}", "--shard", f"b={other}", *bson_out],
        "workers": [
            "replay",
            "--shard",
            f"a={bson_path}",
            "--shard",
            f"b={other}",
            "--workers",
            "2",
            *bson_out,
        ],
        "merge-reference": [
            "replay",
            "--shard",
            f"a={jsonl}",
            "--shard",
            f"b={other_jsonl}",
            *bson_out,
        ],
    }[path]


def run_paths(
    directory: Path,
    entries: Sequence[Mapping[str, Any]],
    capsysbinary: pytest.CaptureFixture[bytes],
    paths: Sequence[str] = ALL_PATHS,
    *,
    name: str = "oplog",
) -> dict[str, Verdict]:
    """Replay ``entries`` on each of ``paths``; the verdict of each."""
    bson_path = write_oplog(directory, name, entries)
    other = write_oplog(directory, f"{name}-b", other_shard())
    verdicts: dict[str, Verdict] = {}
    for path in paths:
        code = main(argv_for(path, bson_path, other))
        out, err = capsysbinary.readouterr()
        verdicts[path] = Verdict(code, out, err.decode())
    return verdicts


def split_events(data: bytes) -> list[bytes]:
    """Concatenated BSON documents, one by one."""
    documents, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "little")
        documents.append(data[pos : pos + size])
        pos += size
    return documents


def assert_same_output(verdicts: Mapping[str, Verdict]) -> None:
    """Every path succeeded; single-oplog paths wrote the same events, merges too.

    ``fast-json`` and ``expanded`` write other renderings, so they are only checked for
    success and their event count.
    """
    for path, verdict in verdicts.items():
        assert verdict.code == 0, f"{path}: {verdict.err}"
    single = [verdicts[p].out for p in ("fast", "reference") if p in verdicts]
    assert all(out == single[0] for out in single), "single-oplog paths differ"
    merged = [verdicts[p].out for p in MERGE_PATHS if p in verdicts]
    assert all(out == merged[0] for out in merged), "merge paths differ"
    if "fast-json" in verdicts and "fast" in verdicts:
        lines = verdicts["fast-json"].out.decode().splitlines()
        assert len(lines) == len(split_events(verdicts["fast"].out))


def assert_refused(verdicts: Mapping[str, Verdict], *fragments: str) -> list[str]:
    """Every path exited 1 with a one-line message holding each of ``fragments``."""
    messages = []
    for path, verdict in verdicts.items():
        assert verdict.code == 1, f"{path} exited {verdict.code}: {verdict.err}"
        message = verdict.message
        assert "Traceback" not in verdict.err
        for fragment in fragments:
            assert fragment in message, f"{path}: {message}"
        messages.append(message)
    return messages
