"""The one parser of a resume token typed as text: a token document or bare ``_data`` hex.

``shardstream token decode``, the start options ``--resume-after``/``--start-after`` of
``replay``, ``watch`` and ``ingest``, and the Spark source's ``resumeAfter``/``startAfter``
all read tokens through :func:`parse_token_text`, so the same text gets the same verdict
everywhere: the decoded token, or a :class:`ResumeTokenError` naming the input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.json_input import EXTENDED_JSON_ERRORS, depth_problem
from shardstream.resume_token.token_data import ResumeTokenData
from shardstream.resume_token.token_decoder import decode_token, decode_token_document
from shardstream.resume_token.token_json import loads

TOKEN_TEXT_FORMS: Final = "a token document {_data[, _typeBits]} in Extended JSON or _data hex"


def parse_token_text(text: str, name: str = "token") -> ResumeTokenData:
    """Decode ``text``: a JSON token document when it starts with ``{``, else ``_data`` hex.

    Args:
        name: what the text was given as (``--resume-after``, ``resumeAfter``): the
            messages start with it.

    Raises:
        ResumeTokenError: empty text, text that is not (Extended) JSON or nests too deep,
            a JSON value that is not a token document, or an invalid token.
    """
    if not text.strip():
        raise ResumeTokenError(f"{name}: expected {TOKEN_TEXT_FORMS}, got {text!r}")
    document = (
        parse_json_object(text, name, TOKEN_TEXT_FORMS) if text.lstrip().startswith("{") else None
    )
    try:
        if document is not None:
            return decode_token_document(document)
        return decode_token(text.strip())
    except ResumeTokenError as exc:
        raise ResumeTokenError(f"{name}: {exc}") from exc


def parse_json_object(text: str, name: str, expected: str) -> Mapping[str, Any]:
    """``text`` as one Extended JSON object, or a ResumeTokenError naming ``name``.

    Every error Extended JSON parsing can raise is caught here (a bad ``$oid``, a
    ``$numberDecimal`` out of range, a ``$date`` of 1e400, nesting beyond
    ``MAX_JSON_DEPTH``...), so no caller meets anything but shardstream's error.
    """
    problem = depth_problem(text)
    if problem is not None:  # refused before parsing: json would recurse once per level
        raise ResumeTokenError(f"{name}: {problem} in {text!r:.60}")
    try:
        document = loads(text)
    except EXTENDED_JSON_ERRORS as exc:
        raise ResumeTokenError(
            f"{name}: expected {expected}, got {text!r:.120} ({_reason(exc)})"
        ) from exc
    if not isinstance(document, Mapping):
        raise ResumeTokenError(
            f"{name}: expected {expected}, got {type(document).__name__} {document!r:.100}"
        )
    return document


def _reason(exc: BaseException) -> str:
    # One line: the parser's own words, cut short (a JSONDecodeError names line and column).
    if isinstance(exc, RecursionError):
        return "nested too deep"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text:.160}"
