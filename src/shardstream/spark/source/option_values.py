"""One option's text as its value: flags, integers, sizes, timestamps, resume tokens.

Each parser names the option and quotes what arrived when the text is not what it expects.
Sizes (``maxBytesPerTrigger``, the ingest's ``--max-bytes-per-batch``) are bytes or a number
with ``k``, ``m`` or ``g`` (binary multiples, as Spark's own size options): a count of events
alone lets a batch of large documents outgrow what Spark moves in one piece (a task's Arrow
batch past the JVM's direct memory, the driver's ``toArrow()`` past its heap), and a batch
that fails that way fails again on every restart.
"""

from __future__ import annotations

import re
from typing import Final

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenError
from shardstream.resume_token import ResumeTokenData, decode_token
from shardstream.resume_token.json_input import EXTENDED_JSON_ERRORS
from shardstream.resume_token.token_json import loads
from shardstream.resume_token.token_text import parse_token_text
from shardstream.spark.source.offsets import token_of_text

_SIZE: Final = re.compile(r"(\d+)([kmg]?)b?")
_MULTIPLES: Final = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_byte_size(name: str, text: str) -> int:
    """``text`` as a number of bytes (>= 1): digits, then optionally k, m or g.

    Raises:
        ConfigurationError: anything else, naming the option.
    """
    found = _SIZE.fullmatch(text.strip().lower())
    size = int(found.group(1)) * _MULTIPLES[found.group(2)] if found else 0
    if size < 1:
        raise ConfigurationError(
            f"expected {name} as a size in bytes >= 1 (e.g. 268435456, 512k, 256m, 1g), "
            f"got {text!r:.40}"
        )
    return size


def format_byte_size(size: int) -> str:
    """``size`` in the largest multiple that divides it (``parse_byte_size`` reads it back)."""
    for suffix in ("g", "m", "k"):
        if size % _MULTIPLES[suffix] == 0:
            return f"{size // _MULTIPLES[suffix]}{suffix}"
    return str(size)


def flag_value(name: str, text: str | None) -> bool:
    """``true`` or ``false`` in any case (absent: false)."""
    if text is None:
        return False
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ConfigurationError(f"expected {name} true or false, got {text!r}")
    return value == "true"


def integer_value(name: str, text: str | None, default: int) -> int:
    """An integer (absent: ``default``)."""
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"expected {name} to be an integer, got {text!r}") from None


def byte_size_value(name: str, text: str | None) -> int | None:
    """A size as :func:`parse_byte_size` reads it (absent: None)."""
    return None if text is None else parse_byte_size(name, text)


def pattern_values(name: str, text: str | None) -> tuple[str, ...]:
    """Namespace patterns, comma-separated (``shop.*,crm.users``; absent: none).

    Each is checked when the stream options are built (``NamespacePattern.parse``); an
    empty one (``shop.*,,x``, a trailing comma) is refused there as a pattern of nothing.
    """
    if text is None:
        return ()
    if not text.strip():
        raise ConfigurationError(
            f"expected {name} as comma-separated DB.COLL patterns, got {text!r}"
        )
    return tuple(part.strip() for part in text.split(","))


def positive_value(name: str, text: str | None) -> int | None:
    """An integer >= 1 (absent: None)."""
    if text is None:
        return None
    value = integer_value(name, text, 0)
    if value < 1:
        raise ConfigurationError(f"expected {name} to be an integer >= 1, got {text!r}")
    return value


def timestamp_value(name: str, text: str | None) -> Timestamp | None:
    """``T,I`` (seconds, increment) or an Extended JSON ``{"$timestamp": ...}``."""
    if text is None:
        return None
    if text.lstrip().startswith("{"):
        try:
            value = loads(text)
        except EXTENDED_JSON_ERRORS:
            value = None
        if isinstance(value, Timestamp):
            return value
    else:
        seconds, sep, increment = text.partition(",")
        try:
            if sep:
                return Timestamp(int(seconds), int(increment))
        except (ValueError, TypeError, OverflowError):
            pass
    raise ConfigurationError(
        f'expected {name} as T,I (seconds,increment) or {{"$timestamp": ...}}, got {text!r}'
    )


def token_value(name: str, text: str | None) -> ResumeTokenData | None:
    """A token document in Extended JSON, bare ``_data`` hex, or an offset's token text.

    An offset's text (``_data`` hex, then ``:`` and the ``_typeBits`` hex when there are
    any) lets a sink that stored a batch's watermark start a new query just after it.
    """
    if text is None:
        return None
    if not text.strip() or text.lstrip().startswith("{"):
        return parse_token_text(text, name)  # the CLI's parser: the same verdict everywhere
    try:
        return decode_token(token_of_text(text.strip()))
    except ValueError as exc:  # the type bits after ':' are not hex
        if isinstance(exc, ResumeTokenError):
            raise ResumeTokenError(f"{name}: {exc}") from exc  # as parse_token_text says it
        raise ResumeTokenError(
            f"expected {name} as _data hex, optionally followed by ':' and the _typeBits "
            f"hex, got {text!r:.120}"
        ) from exc
