"""Imports only point downward: resume_token -> oplog -> transform -> merger -> spark.

A module may import its own layer and the layers before it, never a later one;
``sim``, ``emulator``, ``cli`` and ``demo`` sit beside the layers and may import any.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "src" / "shardstream"
LAYERS = ["errors", "resume_token", "oplog", "transform", "merger", "spark"]


def _layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "shardstream" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_upward_import(path: Path) -> None:
    own = _layer_of("shardstream." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    if own is None:
        return
    for module in _imports(path):
        target = _layer_of(module)
        assert target is None or target <= own, f"{path.name} imports {module}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pyspark_only_in_spark_layer(path: Path) -> None:
    if "spark" in path.relative_to(PACKAGE).parts:
        return
    assert not any(m.split(".")[0] == "pyspark" for m in _imports(path)), path.name
