"""The client a live oplog tailer reads one shard through.

Its socket timeout must exceed the tailing cursor's ``maxAwaitTimeMS``: pymongo never
retries a getMore, and without a timeout a stalled shard would block one forever
(testing.md §5); with one shorter than the await, every quiet getMore would fail. The URI's
password is kept apart so that no message quotes it, even bare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError
from pymongo.uri_parser import parse_uri

from shardstream.errors import ConfigurationError
from shardstream.oplog.read_preference import check_read_preference
from shardstream.oplog.redaction import redact_text


def tailing_client(
    shard_uri: str,
    where: str,
    *,
    await_ms: int,
    read_preference: str,
    client_options: Mapping[str, Any] | None,
) -> tuple[MongoClient[Any], str]:
    """A lazily connecting client of ``shard_uri`` (``where``: the shard in messages), and
    the URI's password ("" for none).

    ``client_options`` are extra ``MongoClient`` keyword arguments; ``socketTimeoutMS``
    defaults to ``await_ms + 5000``.

    Raises:
        ConfigurationError: a bad read preference, socket timeout or URI.
    """
    options: dict[str, Any] = {"socketTimeoutMS": await_ms + 5000}
    options.update(client_options or {})
    options["readPreference"] = check_read_preference(read_preference)
    timeout = options["socketTimeoutMS"]
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > await_ms):
        raise ConfigurationError(
            f"{where}: socketTimeoutMS must exceed await_ms={await_ms}, got {timeout!r}"
        )
    secret = ""
    try:
        secret = parse_uri(shard_uri).get("password") or ""
        return MongoClient(shard_uri, **options), secret
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"{where}: {redact_text(str(exc), secret)}") from None
