"""Real sharded clusters in Docker, for machines that have an engine.

Every test here is marked ``docker``.  Without a usable Docker engine they are
skipped with the reason; ``SHARDSTREAM_REQUIRE_DOCKER=1`` turns that skip into a
failure, so a CI runner with Docker never skips in silence.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def docker_problem() -> str | None:
    """Why real-cluster tests cannot run here, or None when they can."""
    if os.environ.get("SHARDSTREAM_DOCKER_TESTS") == "0":
        return "disabled with SHARDSTREAM_DOCKER_TESTS=0"
    try:
        import testcontainers  # noqa: F401

        import docker
    except ImportError as exc:
        return f"the docker / testcontainers packages are missing: {exc}"
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith(("tcp://", "ssh://")):
        return "a remote DOCKER_HOST: the cluster's published ports must be local"
    socket_path = host.removeprefix("unix://") if host else "/var/run/docker.sock"
    if not Path(socket_path).exists():
        # Checked first: a failed connection attempt leaks a socket inside docker-py.
        return f"no Docker engine: {socket_path} does not exist"
    try:
        docker.from_env(timeout=5).ping()
    except Exception as exc:
        return f"no usable Docker engine: {type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Skip (or, with SHARDSTREAM_REQUIRE_DOCKER=1, fail) when Docker cannot be used."""
    problem = docker_problem()
    if problem is None:
        return
    if os.environ.get("SHARDSTREAM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"SHARDSTREAM_REQUIRE_DOCKER=1 but {problem}")
    pytest.skip(problem)
