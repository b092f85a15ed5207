"""Sync: ``GET /metrics``, the progress document in the Prometheus text format.

A collector (``prometheus_client``) that reads the progress document when scraped, so the
metrics and ``/api/v1/progress`` never disagree and nothing is counted twice. Each sync
has a registry of its own (not the process-wide default), so two syncs in one process
(tests, a library user) do not collide.

Metrics, all prefixed ``shardstream_sync_``: ``events_applied_total``,
``documents_copied_total``, ``documents_estimated``, ``conflicts_total``,
``target_retries_total`` (counters and gauges); ``lag_seconds`` and
``applied_cluster_time_seconds`` (absent until measured); ``shard_lag_seconds{shard}``;
``state{shardstream_sync_state}`` (a state set: 1 for the current state); ``can_commit`` and
``can_write`` (0 or 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector

from shardstream.cluster_sync.sync_control import STATES

PREFIX = "shardstream_sync_"


class SyncCollector(Collector):
    """The metrics of one sync, read from its progress document at each scrape."""

    def __init__(self, progress: Callable[[], dict[str, Any]]) -> None:
        self._progress = progress

    def collect(self) -> Iterator[Metric]:
        """The metrics as of now."""
        doc = self._progress()
        labels = {"sync_id": doc["syncId"]}

        def counter(name: str, help_text: str, value: float) -> Metric:
            family = CounterMetricFamily(PREFIX + name, help_text, labels=list(labels))
            family.add_metric(list(labels.values()), value)
            return family

        def gauge(name: str, help_text: str, value: float) -> Metric:
            family = GaugeMetricFamily(PREFIX + name, help_text, labels=list(labels))
            family.add_metric(list(labels.values()), value)
            return family

        yield counter("events_applied", "change events applied by this run", doc["eventsApplied"])
        yield counter(
            "documents_copied", "documents copied by the initial copy", doc["documentsCopied"]
        )
        yield gauge(
            "documents_estimated",
            "documents the copy expects (estimated counts)",
            doc["estimatedDocuments"],
        )
        yield counter(
            "conflicts", "target writes skipped or overwritten by --on-conflict", doc["conflicts"]
        )
        yield counter("target_retries", "target writes sent again (this process)", doc["retries"])
        yield gauge("can_commit", "1 when a commit may be asked for", float(doc["canCommit"]))
        yield gauge(
            "can_write", "1 once committed: writes may go to the target", float(doc["canWrite"])
        )
        if doc["lagTimeSeconds"] is not None:
            yield gauge(
                "lag_seconds",
                "the source's newest committed time minus the applied time",
                doc["lagTimeSeconds"],
            )
        applied = doc["appliedClusterTime"]
        if applied is not None:
            yield gauge(
                "applied_cluster_time_seconds",
                "the cluster time applied through (seconds part)",
                applied["t"],
            )
        shard_lag = GaugeMetricFamily(
            PREFIX + "shard_lag_seconds",
            "how far a source shard's position is behind the source's time",
            labels=[*labels, "shard"],
        )
        for name, shard in doc["shards"].items():
            if shard["lagSeconds"] is not None:
                shard_lag.add_metric([*labels.values(), name], shard["lagSeconds"])
        yield shard_lag
        state = StateSetMetricFamily(PREFIX + "state", "the sync's state", labels=list(labels))
        state.add_metric(list(labels.values()), {name: name == doc["state"] for name in STATES})
        yield state


def metrics_registry(progress: Callable[[], dict[str, Any]]) -> CollectorRegistry:
    """A registry holding one sync's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SyncCollector(progress))
    return registry


def metrics_text(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in the Prometheus text exposition format (0.0.4)."""
    return generate_latest(registry)
