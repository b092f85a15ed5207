"""A batch's entries as their bytes, made into documents only if someone reads them.

A raw source (a BSON file's, the process tailer's) hands the fast path its entries' bytes;
building a ``RawBSONDocument`` per entry only for the fast path to take its bytes back out
cost a task 2-3 us per entry. :class:`RawEntries` is the batch's ``entries`` all the same (a
sequence of ``RawBSONDocument`` s, each made when read), and holds ``raws``, the bytes, for
the readers that want them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from bson.raw_bson import RawBSONDocument

from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS


class RawEntries(Sequence[RawBSONDocument]):
    """Entries kept as BSON bytes, each already framed as one whole document.

    Args:
        raws: the entries' bytes; each must be a document ``RawBSONDocument`` accepts (its
            length prefix its size, a final NUL), as the sources check when framing.
    """

    __slots__ = ("raws",)

    def __init__(self, raws: Sequence[bytes]) -> None:
        self.raws = raws

    def __len__(self) -> int:
        return len(self.raws)

    @overload
    def __getitem__(self, index: int) -> RawBSONDocument: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RawBSONDocument]: ...

    def __getitem__(self, index: int | slice) -> RawBSONDocument | Sequence[RawBSONDocument]:
        if isinstance(index, slice):
            return RawEntries(self.raws[index])
        return RawBSONDocument(self.raws[index], RAW_OPLOG_CODEC_OPTIONS)
