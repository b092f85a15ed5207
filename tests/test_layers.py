"""The package's layers, in data-flow order, and the rules that keep them so.

``LAYERS`` is the one place the order lives (README "Layout" lists the same): a module may
import its own layer and the layers before it, never a later one; every module belongs to
a layer; no two modules import each other, directly or round a circle (``TYPE_CHECKING`` and
function-level imports count too); pyspark is imported only inside ``spark``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "src" / "shardstream"

# Each entry: the top-level names (subpackages or root modules) of one layer, lowest first.
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("resume_token",),
    ("oplog",),  # the only network I/O
    ("transform",),
    ("match",),
    ("merger",),  # the mongos twin: no pymongo import
    ("stream", "change_stream"),  # the public API: watch(), ChangeStream
    ("replay",),
    ("cluster_sync",),  # cluster-to-cluster sync on the merged stream
    ("__init__",),  # the package: watch(), sync(), verify() by name
    ("sim", "emulator"),  # the simulated cluster and the wire emulator
    ("spark",),  # the only importer of pyspark
    ("bench",),
    ("cli", "__main__"),
]
_RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(["shardstream", *parts])


def _top(module: str) -> str | None:
    """The layer name of a ``shardstream`` module (``__init__`` for the package itself)."""
    parts = module.split(".")
    if parts[0] != "shardstream":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


_ALL_MODULES = {_module_name(path) for path in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, at any depth of its code, as absolute names."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from shardstream.x import y` imports the module shardstream.x.y if there is
            # one (its package's __init__ runs first, which is no edge of its own), else a
            # name defined in shardstream.x.
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield submodule if submodule in _ALL_MODULES else node.module


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
SOURCES = list(MODULES.values())


def _layer_of(path: Path) -> int:
    name = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    assert name in _RANK, f"{name} is in no layer: add it to LAYERS (and README 'Layout')"
    return _RANK[name]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_upward_import(path: Path) -> None:
    own = _layer_of(path)
    for module in _imports(path):
        target = _top(module)
        if target is None:
            continue  # another library
        assert _RANK[target] <= own, f"{path.name} imports {module}, a later layer"


def test_every_root_module_is_the_public_api_or_an_entry_point() -> None:
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    # stream.py: watch(); change_stream.py: the ChangeStream it returns.
    assert root == ["__init__.py", "__main__.py", "change_stream.py", "errors.py", "stream.py"]


def test_no_import_circle() -> None:
    graph = {
        name: sorted({m for m in _imports(path) if m in MODULES and m != name})
        for name, path in MODULES.items()
    }
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in graph[name]:
            if state.get(target) == 1:
                circle = [*path[path.index(target) :], target]
                pytest.fail(f"import circle: {' -> '.join(circle)}")
            elif state.get(target) is None:
                visit(target, [*path, target])
        state[name] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pyspark_only_in_spark_layer(path: Path) -> None:
    if path.relative_to(PACKAGE).parts[0] == "spark":
        return
    assert not any(m.split(".")[0] == "pyspark" for m in _imports(path)), path.name


@pytest.mark.parametrize(
    "path",
    [p for p in SOURCES if p.relative_to(PACKAGE).parts[0] in {"merger", "transform", "match"}],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_pure_layers_import_no_driver(path: Path) -> None:
    # The merge and the transform run on entries, whatever their source: pymongo stays in
    # oplog (the I/O), stream (the public watch()) and the commands above them.
    assert not any(m.split(".")[0] == "pymongo" for m in _imports(path)), path.name
