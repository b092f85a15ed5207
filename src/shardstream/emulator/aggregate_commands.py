"""Emulator: ``aggregate`` on a collection, for the few stages a copy's split needs.

Stages: ``$match`` (the ``find`` filter subset), ``$sample``, ``$sort``, ``$project``
(inclusions and exclusions), ``$skip``, ``$limit`` and ``$group`` (accumulators ``$sum``,
``$min`` and ``$max``; a live window's planner sizes a shard's oplog with it), run in
order over a snapshot of the collection (on mongos: every shard's documents).  Any other
stage, ``$changeStream`` included, is refused with the server's ``Location40324``
("Unrecognized pipeline stage name"), so a test never passes on a stage the emulator does
not run.

``$sample`` follows the server's two plans: a collection of more than 100 documents asked
for less than 5 % of them is sampled with a random cursor, which may return a document
more than once; otherwise every document is read and a random ``size`` of them returned,
each once.  The random source is seeded, so a run is reproducible.

See also src/mongo/db/pipeline/document_source_sample.cpp and
src/mongo/db/query/get_executor.cpp (the random-cursor plan's conditions).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from shardstream.emulator.cursors import ListCursor, ServerCursor, select, sort_documents
from shardstream.emulator.faults import CommandError
from shardstream.emulator.group_stage import group_documents
from shardstream.emulator.projection import projector

Body = dict[str, Any]
Handler = Callable[[Body], Body]
# The random-cursor plan: more than this many documents, a sample below this fraction.
_RANDOM_CURSOR_MIN_DOCS: Final = 100
_RANDOM_CURSOR_MAX_FRACTION: Final = 0.05
_SEED: Final = 20240101
_STAGES: Final = ("$match", "$sample", "$sort", "$project", "$skip", "$limit", "$group")


def aggregate_handler(
    documents: Callable[[str], list[Any]],
    open_cursor: Callable[[ServerCursor, Any], Body],
) -> Handler:
    """The ``aggregate`` handler over ``documents(ns)``; ``open_cursor`` builds the reply."""
    rng = random.Random(_SEED)

    def aggregate(body: Body) -> Body:
        name, pipeline = body.get("aggregate"), body.get("pipeline")
        if not isinstance(pipeline, list):
            raise CommandError(
                14, "TypeMismatch", "'pipeline' option must be specified as an array"
            )
        for stage in pipeline:  # an unknown stage first: it says most about what is missing
            _stage(stage)
        if not isinstance(name, str) or not name:
            raise CommandError(
                2, "BadValue", f"emulator aggregates a named collection only, got {name!r}"
            )
        options = body.get("cursor")
        if not isinstance(options, Mapping):
            raise CommandError(9, "FailedToParse", "The 'cursor' option is required")
        ns = f"{body.get('$db')}.{name}"
        results = run_pipeline(documents(ns), pipeline, rng)
        return open_cursor(ListCursor(ns, results), options.get("batchSize"))

    return aggregate


def run_pipeline(docs: list[Any], pipeline: list[Any], rng: random.Random) -> list[Any]:
    """The documents ``pipeline`` makes of ``docs``.

    Raises:
        CommandError: ``Location40324`` for a stage outside the subset; ``BadValue`` or
            ``Location28747`` for a malformed one.
    """
    for stage in pipeline:
        name, spec = _stage(stage)
        if name == "$match":
            docs = select(docs, spec, 0, 0)
        elif name == "$sample":
            docs = _sample(docs, spec, rng)
        elif name == "$sort":
            docs = sort_documents(docs, spec)
        elif name == "$project":
            shape = projector(spec)
            docs = [shape(doc) for doc in docs]
        elif name == "$skip":
            docs = docs[_count(spec, "$skip") :]
        elif name == "$group":
            docs = group_documents(docs, spec)
        else:
            docs = docs[: _positive(spec, "$limit")]
    return docs


def _stage(stage: Any) -> tuple[str, Any]:
    if not isinstance(stage, Mapping) or len(stage) != 1:
        raise CommandError(
            40323,
            "Location40323",
            f"A pipeline stage specification object must contain exactly one field, got {stage!r}",
        )
    ((name, spec),) = stage.items()
    if name not in _STAGES:
        raise CommandError(
            40324,
            "Location40324",
            f"Unrecognized pipeline stage name: '{name}' (the emulator runs {', '.join(_STAGES)})",
        )
    return name, spec


def _sample(docs: list[Any], spec: Any, rng: random.Random) -> list[Any]:
    if not isinstance(spec, Mapping) or set(spec) != {"size"}:
        raise CommandError(28749, "Location28749", f"$sample takes only 'size', got {spec!r}")
    size = _positive(spec["size"], "$sample size")
    if len(docs) > _RANDOM_CURSOR_MIN_DOCS and size < len(docs) * _RANDOM_CURSOR_MAX_FRACTION:
        return rng.choices(docs, k=size)  # a random cursor may repeat a document
    return rng.sample(docs, min(size, len(docs)))


def _count(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise CommandError(15956, "Location15956", f"{what} must be a non-negative integer")


def _positive(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise CommandError(28747, "Location28747", f"{what} must be a positive integer, got {value!r}")
