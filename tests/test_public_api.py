"""The curated public API and the exception tree."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import shardstream
from shardstream import errors, resume_token


def _isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions: the order ruff's RUF022 keeps."""
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


@pytest.mark.parametrize("module", [shardstream, resume_token, errors])
def test_all_is_sorted_and_importable(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert names == sorted(names, key=_isort_key)
    for name in names:
        assert getattr(module, name) is not None


def test_every_error_is_a_shardstream_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ShardstreamError)


def test_input_errors_are_value_errors() -> None:
    assert issubclass(errors.ResumeTokenError, ValueError)
    assert issubclass(errors.ConfigurationError, ValueError)
    assert issubclass(errors.ChangeStreamHistoryLost, errors.OplogError)


def test_error_tree_is_drawn_in_the_docstring() -> None:
    assert errors.__doc__ is not None
    for name in errors.__all__:
        assert name in errors.__doc__


def test_package_imports_without_pyspark() -> None:
    importlib.reload(shardstream)
    assert "pyspark" not in shardstream.__dict__


def test_offline_commands_start_without_pymongo() -> None:
    """replay and token never talk to a cluster: their start-up must not import pymongo.

    pymongo's client takes ~0.15 s to import, which a replay of 10^5 entries would feel.
    """
    code = (
        "import sys\n"
        "import shardstream, shardstream.cli.main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pymongo'))\n"
        "print(shardstream.watch.__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert after == "shardstream.stream"  # and watch() still resolves
