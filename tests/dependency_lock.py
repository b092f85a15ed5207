"""The pinned dependency set (``constraints.txt``): how it is written and checked.

pyproject.toml keeps version *ranges*, for people who install shardstream into their own
environment; ``constraints.txt`` pins every package of the whole set (all extras, their
dependencies, pip and the build backend) to one exact version, so ``make demo`` and
``make test`` install on a fresh machine what passed here, whatever the registry serves
that day. Its header holds a digest of pyproject's requirements: editing them without
``make lock`` fails ``tests/test_dependency_lock.py``.

``make lock`` runs ``python -m tests.dependency_lock write VENV`` on a venv where
``pip install -e '.[dev]'`` has just resolved the newest versions the ranges allow.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "constraints.txt"
PROJECT = "shardstream"
_DIGEST_LINE = re.compile(r"^# pyproject requirements sha256: ([0-9a-f]{64})$", re.MULTILINE)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")
HEADER = """\
# shardstream's pinned dependency set: every extra, the dependencies of each, pip and the
# build backend, one exact version apiece. `make demo` and `make test` install through it
# (pip -c / --build-constraint). Regenerate with `make lock`; do not edit by hand.
"""


def project_requirements(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """Every requirement pyproject.toml names: build backend, dependencies, all extras.

    The extras' references to the project itself (``shardstream[spark,bench]``) are
    left out: they add no package of their own.
    """
    data: dict[str, Any] = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    texts = list(data["build-system"]["requires"]) + list(data["project"]["dependencies"])
    for extra in data["project"].get("optional-dependencies", {}).values():
        texts.extend(extra)
    requirements = [Requirement(text) for text in texts]
    return [r for r in requirements if canonicalize_name(r.name) != PROJECT]


def requirements_digest(requirements: list[Requirement]) -> str:
    """A digest of the requirements, independent of their order and spelling."""
    normal = sorted(
        f"{canonicalize_name(r.name)}[{','.join(sorted(r.extras))}]{r.specifier}"
        for r in requirements
    )
    return hashlib.sha256("\n".join(normal).encode()).hexdigest()


def read_lock(lock: Path = LOCK) -> tuple[str | None, dict[str, str]]:
    """The lock's recorded digest and its pins, name (canonical) -> version.

    Raises:
        ValueError: a line that is neither a comment nor ``name==version``.
    """
    text = lock.read_text(encoding="utf-8")
    digest = _DIGEST_LINE.search(text)
    pins: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pin = _PIN.match(line)
        if pin is None:
            raise ValueError(f"{lock.name}:{number}: expected 'name==version', got {line!r}")
        pins[canonicalize_name(pin[1])] = pin[2]
    return (digest[1] if digest else None), pins


def disagreements(pyproject: Path = PYPROJECT, lock: Path = LOCK) -> list[str]:
    """What is wrong between pyproject.toml and the lock; empty when they agree."""
    requirements = project_requirements(pyproject)
    digest, pins = read_lock(lock)
    problems = []
    if digest != requirements_digest(requirements):
        problems.append(
            f"{lock.name} was written for other pyproject.toml requirements "
            f"(recorded digest {digest}, expected {requirements_digest(requirements)})"
        )
    for requirement in requirements:
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None:
            problems.append(f"{requirement} is not pinned in {lock.name}")
        elif not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(f"{requirement}: {lock.name} pins {pinned}, outside the range")
    return problems


def write_lock(venv: Path, pyproject: Path = PYPROJECT, lock: Path = LOCK) -> None:
    """Write the lock from what ``venv`` has installed (the project itself left out)."""
    frozen = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "freeze", "--all", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    lines = sorted(
        (line for line in frozen if _PIN.match(line) and not line.startswith(f"{PROJECT}==")),
        key=str.lower,
    )
    digest = requirements_digest(project_requirements(pyproject))
    body = "".join(f"{line}\n" for line in lines)
    lock.write_text(f"{HEADER}# pyproject requirements sha256: {digest}\n{body}", encoding="utf-8")
    problems = disagreements(pyproject, lock)
    if problems:
        raise SystemExit("the new lock does not satisfy pyproject.toml:\n" + "\n".join(problems))


def main(argv: list[str]) -> int:
    """``write VENV`` writes the lock; ``check`` prints what disagrees (exit 1 if anything)."""
    if len(argv) == 2 and argv[0] == "write":
        write_lock(Path(argv[1]))
        return 0
    if argv == ["check"]:
        problems = disagreements()
        for problem in problems:
            print(problem, file=sys.stderr)  # noqa: T201 - a command-line check
        return 1 if problems else 0
    print("usage: python -m tests.dependency_lock write VENV | check", file=sys.stderr)  # noqa: T201
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
