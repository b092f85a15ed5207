"""Strip secrets from MongoDB URIs before they reach a log line or an error.

Every message that names a shard's connection string goes through :func:`redact_uri`
(or :func:`redact_text` for free text such as a driver's error message), so a password
typed into a URI never lands in logs, tracebacks or reports.
"""

from __future__ import annotations

import re
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
