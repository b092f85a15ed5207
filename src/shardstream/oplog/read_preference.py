"""The read-preference modes a live tailer accepts, checked before pymongo sees them.

Our errors say what was expected and what arrived in our own words: pymongo's own text for
a bad mode has changed between releases (4.20 no longer names the value), so passing it on
would make the message, and every test of it, depend on the installed driver.
"""

from __future__ import annotations

from typing import Final

from shardstream.errors import ConfigurationError

# The server's mode names (read_preference.idl), spelled as in a URI's readPreference.
READ_PREFERENCE_MODES: Final = (
    "primary",
    "primaryPreferred",
    "secondary",
    "secondaryPreferred",
    "nearest",
)


def check_read_preference(mode: object) -> str:
    """Return ``mode`` if it names a read-preference mode.

    >>> check_read_preference("secondaryPreferred")
    'secondaryPreferred'
    >>> check_read_preference("fastest")
    Traceback (most recent call last):
    ...
    shardstream.errors.ConfigurationError: read preference 'fastest': expected one of ...

    Raises:
        ConfigurationError: anything else, named in the message.
    """
    if isinstance(mode, str) and mode in READ_PREFERENCE_MODES:
        return mode
    raise ConfigurationError(
        f"read preference {mode!r}: expected one of {', '.join(READ_PREFERENCE_MODES)}"
    )
