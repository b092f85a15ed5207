"""Shared test configuration: a deterministic, CI-sized Hypothesis profile."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "shardstream",
    deadline=None,  # CI machines share cores; timing belongs in benchmarks/, not here
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples on every run, so CI failures reproduce
)
settings.load_profile("shardstream")
