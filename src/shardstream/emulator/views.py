"""Emulator: views, kept as mongod keeps them.

A view is one document in its database's ``system.views`` collection, ``{_id: "<db>.<view>",
viewOn, pipeline}``; creating one inserts that document and dropping one deletes it, and
those are the entries the oplog logs (a change stream turns them into ``create`` and
``drop`` events with the definition in ``operationDescription``).  ``listCollections``
lists each view as ``type: "view"`` with ``options: {viewOn, pipeline}``.

Not emulated: reading through a view (a ``find`` on one finds nothing), a view's
collation, ``collMod`` of a view, and the logged creation of ``system.views`` itself, made
unlogged here (a change stream leaves ``system.*`` namespaces out).

See also src/mongo/db/views/durable_view_catalog.cpp and view_catalog.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from shardstream.emulator.document_store import DocumentStore
from shardstream.emulator.faults import CommandError
from shardstream.emulator.write_path import WritePath

Body = dict[str, Any]
SYSTEM_VIEWS: Final = "system.views"
_OPTIONS: Final = frozenset({"viewOn", "pipeline"})


def views_ns(db: str) -> str:
    """The namespace of ``db``'s view catalog."""
    return f"{db}.{SYSTEM_VIEWS}"


def view_definition(store: DocumentStore, ns: str) -> Body | None:
    """The ``system.views`` document of the view ``ns``, if it is one."""
    catalog = store.get(views_ns(ns.partition(".")[0]))
    found = catalog.find({"_id": ns}, 1) if catalog is not None else []
    return found[0] if found else None


def views_of(store: DocumentStore, db: str) -> list[Body]:
    """The view documents of ``db``, in catalog order."""
    catalog = store.get(views_ns(db))
    return catalog.documents() if catalog is not None else []


def create_view(path: WritePath, ns: str, options: Mapping[str, Any]) -> None:
    """Create the view ``ns`` from ``create``'s options; the caller holds the store lock.

    Raises:
        CommandError: an option other than ``viewOn`` / ``pipeline`` (72), a bad
            ``viewOn`` (2) or ``pipeline`` (14), or a namespace that exists (48).
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise CommandError(
            72, "InvalidOptions", f"emulator does not create views with {min(unknown)}"
        )
    view_on, pipeline = options.get("viewOn"), options.get("pipeline", [])
    if not isinstance(view_on, str) or not view_on:
        raise CommandError(2, "BadValue", f"'viewOn' must be a non-empty string, got {view_on!r}")
    if not isinstance(pipeline, list):
        raise CommandError(14, "TypeMismatch", "'pipeline' must be of type array")
    if path.store.get(ns) is not None or view_definition(path.store, ns) is not None:
        raise CommandError(48, "NamespaceExists", f"Namespace {ns} already exists")
    catalog = views_ns(ns.partition(".")[0])
    if path.store.get(catalog) is None:
        path.store.create(catalog, {})
    path.insert(catalog, {"_id": ns, "viewOn": view_on, "pipeline": list(pipeline)}, None)


def drop_view(path: WritePath, ns: str) -> bool:
    """Drop the view ``ns``; False if there is none. The caller holds the store lock."""
    definition = view_definition(path.store, ns)
    catalog = path.store.get(views_ns(ns.partition(".")[0]))
    if definition is None or catalog is None:
        return False
    path.delete(catalog, definition, None)
    return True


def view_entry(definition: Mapping[str, Any]) -> Body:
    """A view's ``listCollections`` entry."""
    name = str(definition["_id"]).partition(".")[2]
    options = {"viewOn": definition["viewOn"], "pipeline": list(definition["pipeline"])}
    return {"name": name, "type": "view", "options": options, "info": {"readOnly": True}}
