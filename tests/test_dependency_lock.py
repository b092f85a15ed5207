"""The pinned dependency set agrees with pyproject.toml, and `make` installs through it."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from .dependency_lock import LOCK, ROOT, disagreements, read_lock, requirements_digest
from .dependency_lock import project_requirements as requirements_of

PYPROJECT_TEXT = """\
[build-system]
requires = ["setuptools>=77"]
[project]
name = "shardstream"
dependencies = ["pymongo>=4.9,<5"]
[project.optional-dependencies]
dev = ["shardstream[spark]", "pytest>=8"]
"""


def test_the_checked_in_lock_agrees_with_pyproject() -> None:
    assert disagreements() == []


def test_every_lock_line_is_an_exact_pin() -> None:
    _digest, pins = read_lock()
    assert pins  # the lock is not empty
    assert "pymongo" in pins
    assert "pyspark" in pins  # the extras are locked too
    assert "shardstream" not in pins


def _write(tmp_path: Path, pyproject: str, lock_lines: list[str], digest: str | None) -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    header = [f"# pyproject requirements sha256: {digest}"] if digest else []
    (tmp_path / "constraints.txt").write_text("\n".join(header + lock_lines) + "\n")
    return tmp_path


def _digest_of(tmp_path: Path, pyproject: str) -> str:
    (tmp_path / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return requirements_digest(requirements_of(tmp_path / "pyproject.toml"))


def test_a_matching_lock_has_no_disagreement(tmp_path: Path) -> None:
    digest = _digest_of(tmp_path, PYPROJECT_TEXT)
    pins = ["pymongo==4.20.1", "pytest==9.0.0", "setuptools==80.0.0", "dnspython==2.7.0"]
    where = _write(tmp_path, PYPROJECT_TEXT, pins, digest)
    assert disagreements(where / "pyproject.toml", where / "constraints.txt") == []


def test_a_changed_requirement_without_a_new_lock_is_caught(tmp_path: Path) -> None:
    digest = _digest_of(tmp_path, PYPROJECT_TEXT)
    changed = PYPROJECT_TEXT.replace("pymongo>=4.9,<5", "pymongo>=4.21,<5")
    pins = ["pymongo==4.20.1", "pytest==9.0.0", "setuptools==80.0.0"]
    where = _write(tmp_path, changed, pins, digest)
    problems = disagreements(where / "pyproject.toml", where / "constraints.txt")
    assert len(problems) == 2
    assert "other pyproject.toml requirements" in problems[0]
    assert problems[1] == "pymongo<5,>=4.21: constraints.txt pins 4.20.1, outside the range"


def test_a_requirement_missing_from_the_lock_is_caught(tmp_path: Path) -> None:
    digest = _digest_of(tmp_path, PYPROJECT_TEXT)
    where = _write(tmp_path, PYPROJECT_TEXT, ["pymongo==4.20.1", "pytest==9.0.0"], digest)
    problems = disagreements(where / "pyproject.toml", where / "constraints.txt")
    assert problems == ["setuptools>=77 is not pinned in constraints.txt"]


def test_a_line_that_is_not_a_pin_is_refused(tmp_path: Path) -> None:
    where = _write(tmp_path, PYPROJECT_TEXT, ["pymongo>=4.9"], None)
    with pytest.raises(ValueError, match=r"expected 'name==version', got 'pymongo>=4.9'"):
        read_lock(where / "constraints.txt")


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="checks the project's own .venv, which `make` builds through the lock",
)
def test_the_project_venv_holds_exactly_the_locked_versions() -> None:
    _digest, pins = read_lock(LOCK)
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    # The venv's own setuptools is not the build backend's (builds run isolated).
    wrong = {
        name: (version, installed.get(name))
        for name, version in pins.items()
        if name != "setuptools" and installed.get(name) != version
    }
    assert wrong == {}
