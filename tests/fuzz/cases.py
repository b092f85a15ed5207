"""One fuzzed input of each kind, run on every path and judged (see harness.py).

Each function takes a seeded ``random.Random`` and a scratch directory, builds one input,
runs it through ``shardstream.cli.main`` on each path, and returns the failures as
(input description, what went wrong); an empty list when every path agreed.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from pathlib import Path

import bson
from bson import json_util

from shardstream.oplog import InputFormat
from shardstream.replay.engine import reference_batches
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.extended_json import bson_to_json
from tests.fuzz.harness import (
    Verdict,
    describe,
    judge,
    one_line_error,
    reference_verdict,
    run_cli,
    write_shards,
)
from tests.fuzz.mutators import (
    Shards,
    decode,
    mutate,
    mutate_json_line,
    mutate_token_hex,
    token_document_variant,
)

REPLAY_ERROR = "shardstream replay: error:"
Failures = list[tuple[str, str]]


def _reference(
    shards: Sequence[tuple[str, str]], input_format: InputFormat | None, **options: object
) -> tuple[Verdict, Verdict, Verdict]:
    """The reference path's BSON, canonical JSON and relaxed JSON output for ``shards``."""
    events: list[bytes] = []

    def produce() -> bytes:
        stream_options = ChangeStreamOptions(**options)  # type: ignore[arg-type]
        for batch in reference_batches(shards, input_format, stream_options):
            events.extend(batch)
        return b"".join(events)

    verdict = reference_verdict(produce)
    if verdict.error is not None or verdict.crash is not None:
        return verdict, verdict, verdict
    texts = []
    for relaxed in (False, True):
        texts.append(
            reference_verdict(
                lambda relaxed=relaxed: "".join(  # type: ignore[misc]
                    bson_to_json(event, relaxed=relaxed) + "\n" for event in events
                ).encode("ascii")
            )
        )
    return verdict, texts[0], texts[1]


def replay_case(rng: random.Random, corpus: Shards, directory: Path, *, workers: bool) -> Failures:
    """A mutated multi-shard corpus: one shard alone (a replica set) and all merged."""
    shards = copy.deepcopy(corpus)
    what = mutate(rng, shards)
    args = write_shards(directory, shards)
    failures: Failures = []
    path = args[0].split("=", 1)[1]
    layouts: list[tuple[str, list[tuple[str, str]], list[str]]] = [
        ("replica set", [("shard0", path)], [path]),
        ("merged", [tuple(arg.split("=", 1)) for arg in args], [f"--shard={a}" for a in args]),  # type: ignore[misc]
    ]
    for label, paths, argv in layouts:
        as_bson, as_json, as_relaxed = _reference(paths, None)
        runs = [
            ("bson", [*argv, "--output-format", "bson"], as_bson),
            ("json", argv, as_json),
        ]
        if rng.random() < 0.2:
            runs.append(("relaxed json", [*argv, "--json", "relaxed"], as_relaxed))
        if workers and label == "merged":
            runs.append(
                ("bson --workers 2", [*argv, "--output-format", "bson", "--workers", "2"], as_bson)
            )
        for run_label, run_argv, verdict in runs:
            problem = judge(run_cli(["replay", *run_argv]), verdict, REPLAY_ERROR)
            if problem:
                failures.append((f"replay {label} {run_label} after {what}", problem))
    return failures


def ejson_case(rng: random.Random, corpus: Shards, directory: Path) -> Failures:
    """A shard's entries as Extended JSON lines, one line damaged."""
    entries = corpus[rng.randrange(len(corpus))][1]
    lines = [
        json_util.dumps(decode(doc), json_options=json_util.CANONICAL_JSON_OPTIONS).encode()
        for doc in entries
    ]
    at = rng.randrange(len(lines))
    lines[at] = mutate_json_line(rng, lines[at])
    path = directory / "oplog.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    verdict = _reference([("shard0", str(path))], InputFormat.EJSON)[1]
    run = run_cli(["replay", str(path), "--input-format", "ejson"])
    problem = judge(run, verdict, REPLAY_ERROR)
    return [(f"ejson line {at}: {describe(lines[at])}", problem)] if problem else []


def token_case(rng: random.Random, tokens: Sequence[str], corpus_path: str) -> Failures:
    """A damaged token to ``token decode`` and to the start options of ``replay``."""
    data = rng.choice(tokens)
    if rng.random() < 0.5:
        text = mutate_token_hex(rng, data)
    else:
        text = token_document_variant(
            rng, mutate_token_hex(rng, data) if rng.random() < 0.3 else data
        )
    failures: Failures = []
    run = run_cli(["token", "decode", text])
    if run.crash is not None:
        failures.append((f"token decode {describe(text)}", run.crash))
    elif run.code not in (0, 1) or len(run.stdout.splitlines()) != 1:
        failures.append(
            (f"token decode {describe(text)}", f"exit {run.code}, stdout {run.stdout[:300]!r}")
        )
    flag = rng.choice(["--resume-after", "--start-after"])
    run = run_cli(["replay", corpus_path, flag, text])
    if run.crash is not None:
        failures.append((f"replay {flag} {describe(text)}", run.crash))
    elif run.code == 1:
        problem = one_line_error(run.stderr, REPLAY_ERROR)
        if problem:
            failures.append((f"replay {flag} {describe(text)}", problem))
    elif run.code != 0:
        failures.append((f"replay {flag} {describe(text)}", f"exit {run.code}"))
    return failures


def tokens_of(corpus: Shards, directory: Path) -> list[str]:
    """The resume tokens (``_data``) of a corpus's merged events, to mutate."""
    args = write_shards(directory, corpus)
    paths = [tuple(arg.split("=", 1)) for arg in args]
    tokens = []
    for batch in reference_batches(paths, None, ChangeStreamOptions()):  # type: ignore[arg-type]
        tokens.extend(bson.decode(event)["_id"]["_data"] for event in batch)
    return tokens
