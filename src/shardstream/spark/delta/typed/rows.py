"""A collection's typed columns: inferred from the documents it shows, and rows under them.

:class:`ColumnSet` holds a collection table's columns (``_id`` and one per top-level field,
typed by :mod:`shardstream.spark.delta.typed.column_types`).  :meth:`ColumnSet.fold` goes over
documents in stream order: a field's first typed value makes its column (up to
``max_columns``; schema evolution), later values widen it where a widening covers them.
:meth:`ColumnSet.project` then gives each document's column values, and the relaxed
Extended JSON of the fields that fit no column (``_rescued``).

Fields without a column of their own, so always rescued: a name Delta cannot hold as it is
(``column_types.safe_name``), a name equal (ignoring case: Delta's names are
case-insensitive) to a column already taken or a system column, fields past
``max_columns``, a value whose type no widening of its column covers, and an empty document
or array before its field's type is known.  ``_id`` always has its column: a collection whose
``_id``s mix types keeps it as relaxed Extended JSON text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import pyarrow as pa

from shardstream.spark.delta.typed.bson_columns import BuiltColumns, built_columns
from shardstream.spark.delta.typed.column_arrays import all_fit, arrow_type, column_array, gathered
from shardstream.spark.delta.typed.column_types import (
    CONFLICT,
    JSON_COLUMN,
    JSON_KIND,
    KIND_KEY,
    fits,
    merged,
    safe_name,
    value_type,
)
from shardstream.spark.delta.typed.column_values import (
    Converter,
    Fitter,
    converter,
    fitter,
    relaxed_json,
)

ID: Final = "_id"
RESCUED: Final = "_rescued"
ColumnType: TypeAlias = "pa.DataType | str"  # an Arrow type or column_types.JSON_COLUMN


def arrow_field(name: str, kind: ColumnType) -> pa.Field:
    """The Arrow field of a column (a JSON column is a string marked in its metadata)."""
    if isinstance(kind, str):
        return pa.field(name, pa.string(), metadata={KIND_KEY: JSON_KIND})
    return pa.field(name, kind)


def column_type(field: pa.Field) -> ColumnType:
    """A stored field's column type (the inverse of :func:`arrow_field`)."""
    if field.metadata and field.metadata.get(KIND_KEY) == JSON_KIND:
        return JSON_COLUMN
    return _plain(field.type)


def _plain(kind: pa.DataType) -> pa.DataType:
    """Delta's read-back types as this module writes them (large and view types unlarged)."""
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return pa.binary()
    if pa.types.is_large_list(kind) or pa.types.is_list_view(kind) or pa.types.is_list(kind):
        return pa.list_(_plain(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain(f.type)) for f in kind])
    return kind


@dataclasses.dataclass(slots=True)
class ColumnSet:
    """The typed columns of one collection table (see the module).

    Attributes:
        id_type: the ``_id`` column's type (None until a document is seen).
        fields: the field columns, in the order they were added.
        reserved: the table's system column names (``_doc``, ``_token``, ...).
        max_columns: the most field columns the table gets.
    """

    id_type: ColumnType | None
    fields: dict[str, ColumnType]
    reserved: frozenset[str]
    max_columns: int = 500
    _checks: dict[str, tuple[ColumnType, Fitter, Converter]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )

    def _check(self, name: str, kind: ColumnType) -> tuple[ColumnType, Fitter, Converter]:
        """The column's compiled fitter and converter (rebuilt when its type changed)."""
        found = self._checks.get(name)
        if found is None or found[0] is not kind:
            found = self._checks[name] = (kind, fitter(kind), converter(kind))
        return found

    @classmethod
    def of_schema(
        cls, schema: pa.Schema | None, reserved: Sequence[str], max_columns: int
    ) -> ColumnSet:
        """The columns of a stored table's schema (None: a table not written yet)."""
        fields: dict[str, ColumnType] = {}
        id_type: ColumnType | None = None
        for field in schema or ():
            if field.name == ID:
                id_type = column_type(field)
            elif field.name not in reserved:
                fields[field.name] = column_type(field)
        return cls(id_type, fields, frozenset(reserved), max_columns)

    def signature(self) -> tuple[Any, ...]:
        """What decides a fold's and a projection's outcome: equal signatures, equal results."""
        return (self.id_type, tuple(self.fields.items()), self.reserved, self.max_columns)

    def copy(self) -> ColumnSet:
        return dataclasses.replace(self, fields=dict(self.fields), _checks=dict(self._checks))

    def kinds(self) -> tuple[tuple[str, ColumnType], ...]:
        """``_id`` and the field columns with their types (what :meth:`built` reads under)."""
        return ((ID, self.id_type or pa.string()), *self.fields.items())

    def built(self, raws: list[bytes | None]) -> BuiltColumns | None:
        """The columns the compiled reader builds from documents' BSON ``raws`` (None: it
        reads none, or the columns decide nothing yet): :meth:`fold` and :meth:`project`
        take them as they are and judge only the rest in Python."""
        if self.id_type is None and not self.fields:
            return None  # every field is new: the fold's document by document way
        return built_columns(raws, self.kinds())

    def _read(
        self, built: BuiltColumns | None, count: int
    ) -> tuple[Mapping[str, pa.Array], Sequence[int]]:
        """The arrays ``built`` holds and the rows that may hold a field no column names,
        when ``built`` was read under these columns (else none, and all ``count`` rows)."""
        if built is None or built.kinds != self.kinds():
            return {}, range(count)
        return built.arrays, built.unknown

    def fold(
        self, documents: Iterable[Mapping[str, Any]], built: BuiltColumns | None = None
    ) -> None:
        """Add and widen columns for ``documents``, in stream order.

        A column at a time: a column the compiled reader built (``built``, from
        :meth:`built` under these columns) holds every value; another whose values all fit
        (nearly always) costs a look at their classes; the others go value by value in
        stream order, and the fields without a column document by document, as the order
        decides which become columns first.
        """
        # A sequence is kept as it is: one whose documents are decoded where looked at
        # (batch_typing.DecodedDocuments) has most of them left unread.
        documents = documents if isinstance(documents, Sequence) else list(documents)
        fields = self.fields
        ready, unknown = self._read(built, len(documents))
        names = [name for name in (ID, *fields) if name not in ready]
        values = dict(zip(names, gathered(documents, names), strict=True))
        if self.id_type is None or (ID in values and not all_fit(values[ID], self.id_type)):
            for id_value in values[ID] if ID in values else gathered(documents, [ID])[0]:
                self._fold_id(id_value)
        for name, kind in list(fields.items()):
            if name in values and not all_fit(values[name], kind):
                for value in values[name]:
                    self._widen(name, fields[name], value)
        known = {ID, *fields}
        # The rows with a field no column names (the compiled reader lists those whose
        # value is not null: a null one decides nothing).
        rows = [row for row in unknown if not known.issuperset(documents[row])]
        if not rows:
            return
        names_taken = {name.casefold() for name in (ID, *self.reserved, *fields)}
        for row in rows:
            self._fold_new_fields(documents[row], known, names_taken)

    def _widen(self, name: str, current: ColumnType, value: Any) -> None:
        """Widen column ``name`` (of type ``current``) to hold ``value`` where a widening
        covers it; a value none covers leaves it as it is (the value is rescued)."""
        if value is None or self._check(name, current)[1](value):
            return
        widened = merged(current, value_type(value))
        if widened is not CONFLICT and widened is not None:
            self.fields[name] = widened

    def _fold_id(self, id_value: Any) -> None:
        if self.id_type is not None and self._check(ID, self.id_type)[1](id_value):
            return
        found = merged(self.id_type, value_type(id_value))
        # An _id deciding no type ({}) or not fitting its column's: JSON, as mixed types.
        if found is CONFLICT or (
            id_value is not None and (found is None or not fits(id_value, found))
        ):
            found = JSON_COLUMN
        self.id_type = found

    def _fold_new_fields(
        self, document: Mapping[str, Any], known: set[str], taken: set[str]
    ) -> None:
        """:meth:`fold` of one document's fields that had no column when the fold began."""
        fields = self.fields
        for name, value in document.items():
            if name in known:
                continue
            current = fields.get(name)
            if current is not None:
                self._widen(name, current, value)
            elif (
                value is not None
                and len(fields) < self.max_columns
                and safe_name(name)
                and name.casefold() not in taken
            ):
                kind = value_type(value)
                if kind is not None:
                    fields[name] = kind
                    taken.add(name.casefold())

    def arrow_fields(self) -> list[pa.Field]:
        """``_id`` and the field columns, as Arrow fields."""
        return [arrow_field(ID, self.id_type or pa.string())] + [
            arrow_field(name, kind) for name, kind in self.fields.items()
        ]

    def widened_from(self, before: ColumnSet) -> bool:
        """Whether a column ``before`` had changed its type (the table must be rewritten)."""
        if before.id_type is not None and before.id_type != self.id_type:
            return True
        return any(self.fields[name] != kind for name, kind in before.fields.items())

    def project(
        self, documents: Sequence[Mapping[str, Any] | None], built: BuiltColumns | None = None
    ) -> dict[str, pa.Array]:
        """The column arrays of ``documents`` (None: a row with every column null), plus
        ``_rescued``; the columns ``built`` holds (:meth:`built`) taken as they are."""
        ready, unknown = self._read(built, len(documents))
        names = [name for name in (ID, *self.fields) if name not in ready]
        values_of = dict(zip(names, gathered(documents, names), strict=True))
        arrays: dict[str, pa.Array] = {}
        if ID in ready:
            arrays[ID] = ready[ID]
        else:
            ids = values_of[ID]
            id_kind = self.id_type or pa.string()
            arrays[ID], misfits = column_array(ids, id_kind)
            if misfits:  # the fold made _id's column hold every _id: keep each one's value
                convert = self._check(ID, id_kind)[2]
                arrays[ID] = pa.array([convert(value) for value in ids], arrow_type(id_kind))
        rescued: dict[int, dict[str, Any]] = {}
        for name, kind in self.fields.items():
            if name in ready:
                arrays[name] = ready[name]
                continue
            values = values_of[name]
            arrays[name], misfits = column_array(values, kind)
            for row in misfits:
                rescued.setdefault(row, {})[name] = values[row]
        known = {ID, *self.fields}
        for row in unknown:
            document = documents[row]
            if document is not None and not known.issuperset(document):
                for name, value in document.items():
                    if name not in known and value is not None:
                        rescued.setdefault(row, {})[name] = value
        rescued_column: list[str | None] = [None] * len(documents)
        for row, fields in rescued.items():
            rescued_column[row] = relaxed_json(fields)
        arrays[RESCUED] = pa.array(rescued_column, pa.string())
        return arrays
