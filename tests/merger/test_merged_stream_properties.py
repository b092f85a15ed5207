"""Properties of the merge over simulated clusters, many seeds.

With random delivery delays and batch boundaries:
* the merged output equals every shard's events sorted by token bytes;
* no event leaves the merge before every open shard has promised at least its key;
* the postBatchResumeToken never goes backwards;
* resuming from emitted tokens and postBatchResumeTokens yields exactly the rest.

On both paths (the ``path`` fixture, tests/paths.py); the expected union is the
reference pipeline's.
"""

from __future__ import annotations

from typing import Any

import pytest

from shardstream.merger import MergedStream, ShardChange, ShardChangeKind, StaticTopology
from shardstream.merger.async_results_merger import AsyncResultsMerger
from shardstream.resume_token import ResumeToken, decode_token
from shardstream.sim import SimulatedCluster, SimulationConfig, SimulationResult, simulated_sources
from shardstream.transform import ChangeEvent, ChangeStreamOptions, ShardPipeline, event_to_json
from shardstream.transform import fields as f
from tests.paths import OnPath

SEEDS = range(12)


def _simulate(seed: int, **config: Any) -> SimulationResult:
    defaults: dict[str, Any] = {"seed": seed, "shards": 3, "operations": 250}
    return SimulatedCluster(SimulationConfig(**(defaults | config))).run()


def _reference(result: SimulationResult, options: ChangeStreamOptions) -> list[tuple[str, str]]:
    """Every shard's events, merged by sorting (key, rendering), internal ones dropped."""
    merged_options = options.with_options(merged_by_router=True)
    events: list[tuple[str, str]] = []
    for oplog in result.oplogs.values():
        pipeline = ShardPipeline(merged_options, single_shard=False)
        for entry in oplog:
            for event in pipeline.process(entry):
                if event.operation_type in f.NEW_SHARD_EVENTS:
                    continue
                if not options.show_expanded_events and (
                    event.operation_type not in f.CLASSIC_OPERATION_TYPES
                ):
                    continue
                events.append((event.token.data, event_to_json(event.document)))
    return sorted(events)


def _merged(
    path: OnPath,
    result: SimulationResult,
    options: ChangeStreamOptions,
    seed: int,
    *,
    added: bool = True,
) -> tuple[MergedStream, list[ChangeEvent]]:
    sources = simulated_sources(result, seed=seed, max_batch=7, delay=0.3)
    topology = None
    late = [
        name
        for name in result.oplogs
        if result.shard_added[name] > min(result.shard_added.values())
    ]
    if added and late:
        changes = [
            ShardChange(
                result.shard_added[name], ShardChangeKind.ADDED, name, lambda s=sources[name]: s
            )
            for name in late
        ]
        topology = StaticTopology(changes)
        sources = {name: source for name, source in sources.items() if name not in late}
    return path.merge(sources, options, topology=topology, read_entries=5), []


def _drain(stream: MergedStream, batch: int = 9) -> tuple[list[ChangeEvent], list[ResumeToken]]:
    """Read everything, checking the gate at every release."""
    merger: AsyncResultsMerger = stream._merger
    original = merger.next_ready

    def checked_next_ready() -> ChangeEvent:
        key = merger._merge_queue[0][0]
        for remote in merger._remotes.values():
            if not remote.exhausted:
                assert remote.promise is not None
                assert key <= remote.promise.data
        return original()

    merger.next_ready = checked_next_ready  # type: ignore[method-assign]
    events: list[ChangeEvent] = []
    marks: list[ResumeToken] = []
    for _ in range(100_000):
        if stream.exhausted:
            break
        batch_events, mark = stream.next_batch(batch)
        events += batch_events
        if mark is not None:
            marks.append(mark)
    assert stream.exhausted
    return events, marks


@pytest.mark.parametrize("seed", SEEDS)
def test_merge_equals_sorted_union_and_respects_the_gate(path: OnPath, seed: int) -> None:
    result = _simulate(seed, add_shard_at=120 if seed % 3 == 0 else None)
    options = ChangeStreamOptions(show_expanded_events=seed % 2 == 0)
    stream, _ = _merged(path, result, options, seed)
    events, marks = _drain(stream)
    got = [(event.token.data, event_to_json(event.document)) for event in events]
    assert [key for key, _ in got] == sorted(key for key, _ in got)
    assert sorted(got) == _reference(result, options)
    assert [m.data for m in marks] == sorted(m.data for m in marks)
    assert marks[-1].data >= got[-1][0]


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_resuming_from_tokens_and_marks_gives_exactly_the_rest(path: OnPath, seed: int) -> None:
    result = _simulate(seed)
    options = ChangeStreamOptions()
    stream, _ = _merged(path, result, options, seed)
    events, marks = _drain(stream)
    keys = [event.token.data for event in events]
    picks: list[ResumeToken] = [
        events[i].token for i in range(0, len(events), max(1, len(events) // 5))
    ]
    picks += marks[:: max(1, len(marks) // 4)]
    for token in picks:
        data = decode_token(token)
        resumed_options = options.with_options(resume_after=data)
        resumed, _ = _drain(_merged(path, result, resumed_options, seed + 100)[0])
        expected = [key for key in keys if key > token.data]
        assert [event.token.data for event in resumed] == expected, token.data
