"""pytest-benchmark suite for the resume-token codec (run with ``pytest benchmarks``)."""

from __future__ import annotations

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks.token_throughput import general_encode, typical_crud_token
from shardstream.resume_token import decode_token, encode_token

pytestmark = pytest.mark.benchmark(group="resume_token")


def test_encode_typical_crud_token(benchmark: BenchmarkFixture) -> None:
    """Encode one v2 insert token with an ObjectId _id (template path)."""
    data = typical_crud_token()
    assert benchmark(encode_token, data).data.endswith("000004")


def test_encode_general_path(benchmark: BenchmarkFixture) -> None:
    """The same token through the value-walking encoder."""
    data = typical_crud_token()
    assert benchmark(general_encode, data) == encode_token(data).data


def test_decode_typical_crud_token(benchmark: BenchmarkFixture) -> None:
    """Decode the same token back to ResumeTokenData."""
    data = typical_crud_token()
    token = encode_token(data)
    assert benchmark(decode_token, token) == data
