"""Emulator: the update-pipeline subset a sync target is sent, evaluated as mongod does.

Stages: ``$replaceWith`` / ``$replaceRoot``, ``$set`` / ``$addFields`` (top-level and dotted
names into sub-documents) and ``$unset``; their expressions are
:mod:`~.aggregation_expressions`'.  Any other stage is refused (``InvalidPipelineOperator``,
168), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardstream.emulator.aggregation_expressions import MISSING, REMOVE, evaluate
from shardstream.emulator.faults import CommandError


def run_update_pipeline(document: Mapping[str, Any], pipeline: list[Any]) -> dict[str, Any]:
    """Return ``document`` after the update pipeline's stages, in order.

    Raises:
        CommandError: an unsupported stage or expression, or a type error the server
            reports (a non-document result of ``$replaceWith``, ``$size`` of a non-array).
    """
    current: dict[str, Any] = dict(document)
    for stage in pipeline:
        if not isinstance(stage, Mapping) or len(stage) != 1:
            raise CommandError(40323, "Location40323", "a pipeline stage must have one field")
        ((name, spec),) = stage.items()
        if name in ("$replaceWith", "$replaceRoot"):
            expr = spec["newRoot"] if name == "$replaceRoot" else spec
            result = evaluate(expr, {"ROOT": current, "CURRENT": current})
            if not isinstance(result, dict):
                raise CommandError(
                    40228, "Location40228", f"'newRoot' must evaluate to an object, got {result!r}"
                )
            current = result
        elif name in ("$set", "$addFields"):
            scope = {"ROOT": current, "CURRENT": current}
            values = [(path, evaluate(expr, scope)) for path, expr in spec.items()]
            current = dict(current)
            for path, value in values:
                _put_path(current, path.split("."), value)
        elif name == "$unset":
            current = dict(current)
            for path in [spec] if isinstance(spec, str) else spec:
                _put_path(current, path.split("."), REMOVE)
        else:
            raise CommandError(168, "InvalidPipelineOperator", f"unsupported stage {name}")
    return current


def _put_path(document: dict[str, Any], parts: list[str], value: Any) -> None:
    head = parts[0]
    if len(parts) == 1:
        if value is REMOVE or value is MISSING:
            document.pop(head, None)
        else:
            document[head] = value
        return
    child = document.get(head)
    child = dict(child) if isinstance(child, dict) else {}
    _put_path(child, parts[1:], value)
    document[head] = child
