"""Text that leaves the run in an artefact, with the same rules for every writer (run log, HTML
report, Markdown and JSON summaries, junit, terminal): credentials inside URLs redacted
(:func:`redact_url` and the helpers built on it), text from data made inert (:func:`inert`, the
Markdown helpers :func:`md_code` and :func:`md_text`) and JSON written strict (:func:`strict_json`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"

# query parameter names whose value is a credential (compared lower-cased, "-" read as "_")
SECRET_PARAMS = frozenset({
    "api_key", "apikey", "key", "token", "access_token", "id_token", "refresh_token", "auth", "authorization",
    "sig", "signature", "password", "passwd", "pwd", "secret", "client_secret", "x_api_key", "code",
    "x_amz_signature", "x_amz_credential", "x_amz_security_token", "x_goog_signature", "x_goog_credential",
    "session_token", "private_token", "bearer",
})

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")


def _secret_param(name: str) -> bool:
    n = name.strip().lower().replace("-", "_")
    return n in SECRET_PARAMS or n.endswith(("_key", "_token", "_secret", "_password", "_signature"))


def redact_url(url: str) -> str:
    """``url`` with its user-info (``user:password@``) and the values of key-like query parameters
    (:data:`SECRET_PARAMS`, and names ending in ``_key``, ``_token``, ``_secret``, ``_password``,
    ``_signature``) replaced by ``***``; scheme, host, port, path, the other parameters and the
    fragment are kept. A text that does not parse as a URL is returned unchanged."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # e.g. a port that is not a number: no URL to redact structurally
        return re.sub(r"(?<=://)[^/@\s]*@", f"{REDACTED}@", url)
    netloc = parts.netloc
    if "@" in netloc:
        host = parts.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        netloc = f"{REDACTED}@{host}" + (f":{port}" if port is not None else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_secret_param(k) for k, _ in pairs):
            query = urlencode([(k, REDACTED if _secret_param(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted by :func:`redact_url` (a command line, a message)."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_args(args: Sequence[Any]) -> list[str]:
    """A command line's arguments with every URL redacted (``--api-base=URL`` and ``--api-base URL``)."""
    return [redact_text(str(a)) for a in args]


def redact_value(value: Any) -> Any:
    """``value`` (a JSON-like structure: mappings, lists, strings, numbers) with :func:`redact_text`
    applied to every string in it, keys included; other values are returned as they are."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {(redact_text(k) if isinstance(k, str) else k): redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


# what :func:`inert` escapes (lone surrogates: not encodable as UTF-8)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def inert(text: str, *, newlines: bool = True) -> str:
    """``text`` with control characters (C0 but tab and newline, DEL, C1), bidirectional marks,
    embeddings, overrides and isolates (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069), U+2028/9
    and lone surrogates shown escaped: ``\\x00``, ``\\x1b``, ``\\u202e``. ``newlines=False`` escapes
    tab and newline too (one terminal line, one table cell)."""
    out = _UNSAFE.sub(_escape, text)
    if not newlines:
        out = out.replace("\t", "\\t").replace("\n", "\\n")
    return out


def is_inert(text: str) -> bool:
    """True when :func:`inert` leaves ``text`` unchanged."""
    return _UNSAFE.search(text) is None


def md_code(text: str) -> str:
    """``text`` as a Markdown code span that nothing in it can close: the fence is one back-tick
    longer than the longest back-tick run inside (CommonMark 6.1), padded with a space where the
    text starts or ends with a back-tick; control and bidi characters are escaped
    (:func:`inert`), whitespace runs become one space and a pipe is escaped for table cells
    (GitHub's tables read ``\\|`` as a pipe, also inside a code span)."""
    body = " ".join(inert(str(text)).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`"):
        body = f" {body} "
    return f"{fence}{body}{fence}"


_MD_PUNCT = re.compile(r"([\\`*_\[\]|#!~])")


def md_text(text: str) -> str:
    """``text`` as inert Markdown inline text on one line (a table cell, a list item): control and
    bidi characters escaped (:func:`inert`), whitespace runs one space, ``&``, ``<`` and ``>`` as
    entities (no HTML), and Markdown punctuation (back-tick, emphasis, link brackets, pipe,
    backslash) backslash-escaped, so the text reads as written and opens no span, link or tag."""
    body = " ".join(inert(str(text)).split())
    body = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCT.sub(r"\\\1", body)


__all__ = ["REDACTED", "SECRET_PARAMS", "inert", "is_inert", "json_finite", "md_code", "md_text", "redact_args",
           "redact_text", "redact_url", "redact_value", "strict_json"]


def json_finite(o: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """``o`` with NaN/inf floats replaced by None (strict JSON), recursively, and a dict's non-string keys by the
    JSON text of them (``1`` -> ``"1"``, written with ``default``): ``sort_keys`` cannot order mixed keys, nor take
    numpy ones."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {(k if isinstance(k, str) else json.dumps(k, default=default)): json_finite(v, default)
                for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_finite(v, default) for v in o]
    return o


def strict_json(o: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``o`` as strict JSON: non-finite floats written as null (:func:`json_finite`), and any that
    still reach the encoder (through ``default``) an error rather than a bare ``NaN`` a reader rejects."""
    return json.dumps(json_finite(o, kwargs.get("default")), allow_nan=False, **kwargs)
