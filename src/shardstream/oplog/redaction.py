"""Strip secrets from MongoDB URIs before they reach a log line or an error.

Every message that names a shard's connection string goes through :func:`redact_uri`
(or :func:`redact_text` for free text such as a driver's error message), so a password
typed into a URI never lands in logs, tracebacks or reports.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Final

REDACTED: Final = "***"
# URI options whose values are secrets (matched case-insensitively, as the driver does).
_SECRET_OPTIONS: Final = frozenset(
    {"password", "tlscertificatekeyfilepassword", "sslpemkeypassword", "authmechanismproperties"}
)
_URI_IN_TEXT: Final = re.compile(r"mongodb(?:\+srv)?://[^\s'\"<>]+", re.IGNORECASE)
_SCHEME: Final = re.compile(r"^(mongodb(?:\+srv)?://)", re.IGNORECASE)


def _split_userinfo(rest: str) -> tuple[str | None, str]:
    """Split ``user[:password]@hosts...`` into (userinfo, remainder)."""
    netloc = rest.split("/", 1)[0]
    if "@" in netloc:
        userinfo = netloc.rpartition("@")[0]
        return userinfo, rest[len(userinfo) + 1 :]
    # A password with an unescaped "/" (which the driver rejects, but which can still be
    # echoed in an error) puts the "@" after the first "/": treat it as userinfo as long as
    # no query string starts before it, so "host/?appName=a@b" is left alone.
    at = rest.rfind("@")
    if at > 0 and "?" not in rest[:at]:
        return rest[:at], rest[at + 1 :]
    return None, rest


def _redact_query(query: str) -> str:
    parts = []
    for item in query.split("&"):
        key, sep, _value = item.partition("=")
        parts.append(f"{key}={REDACTED}" if sep and key.lower() in _SECRET_OPTIONS else item)
    return "&".join(parts)


def redact_uri(uri: str) -> str:
    """Return ``uri`` with its password and secret options replaced by ``***``.

    The user name is kept (it helps diagnose "wrong user" mistakes and is not a secret);
    the password, ``tlsCertificateKeyFilePassword`` and ``authMechanismProperties``
    (which can hold AWS session tokens) are replaced. Text that is not a MongoDB URI is
    returned unchanged.

    >>> redact_uri("mongodb://app:s3cret@h1:27017,h2/?replicaSet=rs0")
    'mongodb://app:***@h1:27017,h2/?replicaSet=rs0'
    >>> redact_uri("mongodb://h1/")
    'mongodb://h1/'
    """
    match = _SCHEME.match(uri)
    if match is None:
        return uri
    scheme, rest = match.group(1), uri[match.end() :]
    userinfo, remainder = _split_userinfo(rest)
    if userinfo is not None:
        user, colon, _password = userinfo.partition(":")
        rest = f"{user}:{REDACTED}@{remainder}" if colon else f"{user}@{remainder}"
    head, qmark, query = rest.partition("?")
    if qmark:
        rest = f"{head}?{_redact_query(query)}"
    return scheme + rest


def password_of(uri: str) -> str:
    """The password in ``uri``'s userinfo, or "" (so it can be hidden wherever it appears).

    >>> password_of("mongodb://app:s3cret@h1,h2/?replicaSet=rs0")
    's3cret'
    >>> password_of("mongodb://h1/")
    ''
    """
    rest = uri.partition("://")[2]
    userinfo, at, _ = rest.rpartition("@")
    return userinfo.partition(":")[2] if at else ""


def redact_text(text: str, *secrets: str) -> str:
    """Redact every MongoDB URI inside ``text``, and any of ``secrets`` that still appear.

    Args:
        text: A message, e.g. ``str(exc)`` of a driver error.
        secrets: Extra strings to hide wherever they occur (e.g. a password known to the
            caller, which a driver message could quote without its URI around it).
    """
    text = _URI_IN_TEXT.sub(lambda m: redact_uri(m.group(0)), text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redacted_repr(obj: object) -> str:
    """``obj``'s dataclass repr with every MongoDB URI in its fields redacted.

    For the ``__repr__`` of public option and result objects: a dataclass's generated
    repr prints each field as given, so a URI's password would reach any log line that
    shows the object.  Fields declared with ``repr=False`` stay out, as in the generated
    repr; each value is redacted on its own (its repr quoted by Python), so a URI is
    found whole whatever the text around it.
    """
    if not dataclasses.is_dataclass(obj):
        return redact_text(repr(obj))
    shown = ", ".join(
        f"{field.name}={_redacted_value_repr(getattr(obj, field.name))}"
        for field in dataclasses.fields(obj)
        if field.repr
    )
    return f"{type(obj).__qualname__}({shown})"


def _redacted_value_repr(value: object) -> str:
    if isinstance(value, str):
        return repr(redact_uri(value))
    if isinstance(value, Mapping):
        items = ", ".join(
            f"{_redacted_value_repr(k)}: {_redacted_value_repr(v)}" for k, v in value.items()
        )
        return "{" + items + "}"
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        inner = ", ".join(_redacted_value_repr(item) for item in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner}{',' if len(value) == 1 else ''})"
    # Anything else prints its own repr (a nested option object redacts itself); the
    # text is still swept for URIs in case a foreign repr quotes one.
    return redact_text(repr(value))
