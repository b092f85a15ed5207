"""Sync: a view's definition with the collections it reads renamed as ``--map`` renames them.

A view reads collections of its own database by name: ``viewOn``, and the ``from`` of the
``$lookup``, ``$graphLookup`` and ``$unionWith`` stages of its pipeline (nested pipelines
included: ``$lookup``'s, ``$unionWith``'s and ``$facet``'s).  A rule that moves such a
collection (``--map shop.orders=shop.orders_v2``) must move the name in the definition
too, or the target's view would read the old name.  A view only reads its own database,
so a collection it reads that lands in another database than the view is refused, with
both names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.errors import ConfigurationError

Renamer = Callable[[Any], Any]


def mapped_view_options(
    namespaces: NamespaceMap, db: str, view: str, options: Mapping[str, Any]
) -> dict[str, Any]:
    """``options`` (``create``'s or ``collMod``'s) of the source view ``db.view`` for the
    target: unchanged without ``viewOn`` or ``pipeline``, else with the names renamed.

    Raises:
        ConfigurationError: a collection the view reads lands outside the view's database.
    """
    if not namespaces.rules or ("viewOn" not in options and "pipeline" not in options):
        return dict(options)
    home = namespaces.target(db, view)[0]

    def renamed(name: Any) -> Any:
        if not isinstance(name, str):
            return name
        target_db, target_coll = namespaces.target(db, name)
        if target_db != home:
            raise ConfigurationError(
                f"expected the collections view {db}.{view} reads to land in its database "
                f"{home!r}, got {db}.{name} mapped to {target_db}.{target_coll}"
            )
        return target_coll

    mapped = dict(options)
    if "viewOn" in mapped:
        mapped["viewOn"] = renamed(mapped["viewOn"])
    if isinstance(mapped.get("pipeline"), list):
        mapped["pipeline"] = _pipeline(mapped["pipeline"], renamed)
    return mapped


def _pipeline(stages: list[Any], renamed: Renamer) -> list[Any]:
    return [_stage(stage, renamed) for stage in stages]


def _stage(stage: Any, renamed: Renamer) -> Any:
    if not isinstance(stage, Mapping) or len(stage) != 1:
        return stage
    ((name, spec),) = stage.items()
    if name == "$unionWith" and isinstance(spec, str):
        return {name: renamed(spec)}
    if name == "$facet" and isinstance(spec, Mapping):
        return {
            name: {k: _pipeline(v, renamed) if isinstance(v, list) else v for k, v in spec.items()}
        }
    if name not in ("$lookup", "$graphLookup", "$unionWith") or not isinstance(spec, Mapping):
        return stage
    spec = dict(spec)
    field = "coll" if name == "$unionWith" else "from"
    if field in spec:
        spec[field] = renamed(spec[field])
    if isinstance(spec.get("pipeline"), list):
        spec["pipeline"] = _pipeline(spec["pipeline"], renamed)
    return {name: spec}
