"""The whole shardstream exception tree.

Every error the library raises on purpose is a :class:`ShardstreamError`; errors
about bad input also subclass the built-in a caller would naturally catch::

    ShardstreamError                    base; .resumable says whether retrying can help
    ├── ConfigurationError(ValueError)  bad options or arguments
    ├── ResumeTokenError(ValueError)    malformed, truncated or invalid resume token
    ├── OplogError                      an oplog entry or oplog source is unusable
    │   ├── ChangeStreamHistoryLost     the oplog no longer reaches the requested start
    │   └── TransformError              an entry the server's change stream would reject
    ├── ResumeTokenNotFound             a resumed stream never met its resume token
    ├── MergeError                      shard input broke the merge's ordering contract
    └── SinkError                       a lakehouse table cannot take a batch as it is

Messages say what was expected and what arrived (values shown with ``!r``), are one
line (``str()`` escapes any control character a quoted text brings), and never contain
credentials.
"""

from __future__ import annotations

__all__ = [
    "ChangeStreamHistoryLost",
    "ConfigurationError",
    "MergeError",
    "OplogError",
    "ResumeTokenError",
    "ResumeTokenNotFound",
    "ShardstreamError",
    "SinkError",
    "TransformError",
]


class ShardstreamError(Exception):
    """Base of every error shardstream raises on purpose.

    ``resumable`` plays the role of the server's ``ResumableChangeStreamError``
    label: true when reopening the stream from the last token can succeed.
    """

    resumable: bool = False

    def __str__(self) -> str:
        # One line, whatever the message quotes: a field name read from a corrupt entry, or
        # a library's text, may hold a line break or another control character, and the
        # CLI's contract is one error line.
        return printable(super().__str__())


def printable(text: str) -> str:
    """``text`` with every non-printable character (line breaks too) written as its escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class ConfigurationError(ShardstreamError, ValueError):
    """An option or argument has a wrong type or value."""


class ResumeTokenError(ShardstreamError, ValueError):
    """A resume token could not be decoded, encoded or validated."""


class OplogError(ShardstreamError):
    """An oplog entry is corrupt, or a shard's oplog cannot be read."""


class ChangeStreamHistoryLost(OplogError):
    """A shard's oplog no longer reaches back to the requested start point."""


class TransformError(OplogError):
    """An oplog entry could not become a change event (malformed, or rejected by the server).

    Attributes:
        ts: the offending entry's ``ts`` (a bson Timestamp), when known.
        code: the server's error code when the server fails the stream the same way.
    """

    def __init__(self, message: str, *, ts: object = None, code: int | None = None) -> None:
        self.ts = ts
        self.code = code
        super().__init__(message)

    def __str__(self) -> str:
        message = super().__str__()
        where = f" (entry ts {self.ts!r})" if self.ts is not None else ""
        code = f" [server error {self.code}]" if self.code is not None else ""
        return f"{message}{where}{code}"

    def at(self, ts: object) -> TransformError:
        """Return this error tied to the entry at ``ts`` (if it is not tied to one yet)."""
        if self.ts is None:
            self.ts = ts
        return self


class ResumeTokenNotFound(ShardstreamError):
    """The stream passed its resume point without meeting the resume token's event.

    The server fails such a stream with ChangeStreamFatalError (280): the event the
    token names is gone, so resuming there would silently skip or repeat events.
    """

    code = 280


class MergeError(ShardstreamError):
    """A shard's input broke the merge contract (e.g. its promise went backwards)."""


class SinkError(ShardstreamError):
    """A lakehouse sink cannot apply a batch as it is.

    For example a fragment of a split event, an update of a document the mirror never
    held, or rows without the event columns.
    """
