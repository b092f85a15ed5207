"""The typing work one batch's tables of a collection share, over the documents' texts.

A batch hands its document versions over as canonical Extended JSON (the state's text).
Each is written as BSON (``_doc``) straight from its text (``token_json.document_bson``,
in C where it is sure), and the columns are read from that BSON
(:mod:`~shardstream.spark.delta.typed.bson_columns`); a document is decoded into Python
values only where the Python path must look at it: a field no column names yet, a column
the compiled reader leaves to Python, a new table's first documents.  The history and the
mirror of a collection fold the same versions into (usually) the same columns, and the
mirror's rows are some of the history's: each fold, projection and encoding is done once
per batch and reused, matched by the documents' texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast, overload

import pyarrow as pa
from bson.errors import InvalidDocument

from shardstream.resume_token.token_json import document_bson, loads
from shardstream.spark.delta.typed.bson_columns import BuiltColumns, available
from shardstream.spark.delta.typed.rows import ColumnSet

_FIRST_FOLDED: Final = 16  # a new table's documents that make its columns one by one


class DecodedDocuments(Sequence[Mapping[str, Any] | None]):
    """Texts seen as their decoded documents (None: a row with no document), each decoded
    on first look (and once per batch): the compiled columns leave most unread."""

    def __init__(self, texts: Sequence[str | None], decoded: dict[str, dict[str, Any]]) -> None:
        self._texts = texts
        self._decoded = decoded

    def __len__(self) -> int:
        return len(self._texts)

    def _document(self, text: str | None) -> Mapping[str, Any] | None:
        if text is None:
            return None
        found = self._decoded.get(text)
        if found is None:
            found = self._decoded[text] = loads(text)
        return found

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any] | None: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any] | None]: ...

    def __getitem__(
        self, index: int | slice
    ) -> Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None:
        if isinstance(index, slice):
            return [self._document(text) for text in self._texts[index]]
        return self._document(self._texts[index])


class BatchTyping:
    """The typing work one batch's tables of a collection share (see the module)."""

    def __init__(self) -> None:
        self._folds: dict[tuple[Any, ...], ColumnSet] = {}
        self._projections: dict[tuple[Any, ...], tuple[dict[str, int], dict[str, pa.Array]]] = {}
        self._raws: dict[str, bytes] = {}
        self._decoded: dict[str, dict[str, Any]] = {}
        # The compiled reader's columns per column set and texts: a history's fold and its
        # projection read the same versions under the same columns once the table exists.
        self._builds: dict[tuple[Any, ...], BuiltColumns | None] = {}

    def fold(self, before: ColumnSet, texts: Sequence[str]) -> ColumnSet:
        """``before`` with the documents of ``texts`` folded in (a copy)."""
        key = (*before.signature(), tuple(texts))
        found = self._folds.get(key)
        if found is None:
            found = before.copy()
            # A new table's first documents make its columns one by one; the rest are read
            # under them (folding in parts is folding at once: stream order is kept).
            head = 0 if before.id_type is not None or before.fields else _FIRST_FOLDED
            found.fold(cast(Sequence[Mapping[str, Any]], self.documents(texts[:head])))
            rest = texts[head:]
            rest_documents = cast(Sequence[Mapping[str, Any]], self.documents(rest))
            found.fold(rest_documents, self._built(found, rest))
            self._folds[key] = found
        return found.copy()

    def project(self, columns: ColumnSet, texts: Sequence[str | None]) -> dict[str, pa.Array]:
        """``columns.project`` of the documents of ``texts`` (None: a row with every column
        null), taken from an earlier projection when that held all of them under the same
        columns."""
        key = columns.signature()
        earlier = self._projections.get(key)
        if earlier is not None:
            index, arrays = earlier
            rows = [None if text is None else index.get(text, -1) for text in texts]
            if -1 not in rows:
                take = pa.array(rows, pa.int64())
                return {name: array.take(take) for name, array in arrays.items()}
        arrays = columns.project(self.documents(texts), self._built(columns, texts))
        self._projections[key] = ({t: row for row, t in enumerate(texts) if t is not None}, arrays)
        return arrays

    def encoded(self, texts: Sequence[str | None]) -> pa.Array:
        """The documents' BSON (``_doc``; None: null)."""
        return pa.array(self._encoded(texts), pa.binary())

    def documents(self, texts: Sequence[str | None]) -> DecodedDocuments:
        """``texts`` as documents, decoded where looked at."""
        return DecodedDocuments(texts, self._decoded)

    def _encoded(self, texts: Sequence[str | None]) -> list[bytes | None]:
        raws = self._raws
        values: list[bytes | None] = []
        for text in texts:
            if text is None:
                values.append(None)
                continue
            raw = raws.get(text)
            if raw is None:
                raw = raws[text] = document_bson(text)
            values.append(raw)
        return values

    def _built(self, columns: ColumnSet, texts: Sequence[str | None]) -> BuiltColumns | None:
        """The columns the compiled reader builds from the documents' BSON (the ``_doc``
        bytes, written once for both); none where a document has no BSON of its own."""
        if not available():
            return None
        key = (*columns.signature(), tuple(texts))
        if key in self._builds:
            return self._builds[key]
        try:
            raws = self._encoded(texts)
        except (InvalidDocument, TypeError, OverflowError):
            built = None  # shardstream's own Undefined or DBPointer: the Python path's
        else:
            built = columns.built(raws)
        self._builds[key] = built
        return built
