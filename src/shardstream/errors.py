"""The whole shardstream exception tree.

Every error the library raises on purpose is a :class:`ShardstreamError`; errors
about bad input also subclass the built-in a caller would naturally catch::

    ShardstreamError                    base; .resumable says whether retrying can help
    ├── ConfigurationError(ValueError)  bad options or arguments
    ├── ResumeTokenError(ValueError)    malformed, truncated or invalid resume token
    ├── OplogError                      an oplog entry or oplog source is unusable
    │   └── ChangeStreamHistoryLost     the oplog no longer reaches the requested start
    └── MergeError                      shard input broke the merge's ordering contract

Messages say what was expected and what arrived (values shown with ``!r``), and
never contain credentials.
"""

from __future__ import annotations

__all__ = [
    "ChangeStreamHistoryLost",
    "ConfigurationError",
    "MergeError",
    "OplogError",
    "ResumeTokenError",
    "ShardstreamError",
]


class ShardstreamError(Exception):
    """Base of every error shardstream raises on purpose.

    ``resumable`` plays the role of the server's ``ResumableChangeStreamError``
    label: true when reopening the stream from the last token can succeed.
    """

    resumable: bool = False


class ConfigurationError(ShardstreamError, ValueError):
    """An option or argument has a wrong type or value."""


class ResumeTokenError(ShardstreamError, ValueError):
    """A resume token could not be decoded, encoded or validated."""


class OplogError(ShardstreamError):
    """An oplog entry is corrupt, or a shard's oplog cannot be read."""


class ChangeStreamHistoryLost(OplogError):
    """A shard's oplog no longer reaches back to the requested start point."""


class MergeError(ShardstreamError):
    """A shard's input broke the merge contract (e.g. its promise went backwards)."""
