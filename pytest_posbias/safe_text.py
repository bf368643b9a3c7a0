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
from urllib.parse import unquote_plus, urlsplit, urlunsplit

REDACTED = "***"

# query parameter names whose value is a credential (compared lower-cased, "-" read as "_")
SECRET_PARAMS = frozenset({
    "api_key", "apikey", "key", "token", "access_token", "id_token", "refresh_token", "auth", "authorization",
    "sig", "signature", "password", "passwd", "pwd", "secret", "client_secret", "x_api_key", "code",
    "x_amz_signature", "x_amz_credential", "x_amz_security_token", "x_goog_signature", "x_goog_credential",
    "session_token", "private_token", "bearer",
})

# the scheme characters before "://" (RFC 3986: a letter, then letters, digits, "+", "." or "-") and a URL's tail
_SCHEME_CHARS = re.compile(r"[A-Za-z0-9+.\-]*")
_LETTER = re.compile(r"[A-Za-z]")
_URL_TAIL = re.compile(r"[^\s\"'<>`]+")


def _redact_params(text: str) -> str:
    """``text`` (a query or a fragment) with the values of its key-like ``name=value`` parameters
    replaced by ``***``; parameters are separated by ``&`` or ``;`` and everything else is kept as written."""
    pieces = re.split(r"([&;])", text)
    for i in range(0, len(pieces), 2):
        name, eq, _value = pieces[i].partition("=")
        key = unquote_plus(name).strip().lower().replace("-", "_")
        if eq and (key in SECRET_PARAMS or key.endswith(("_key", "_token", "_secret", "_password", "_signature"))):
            pieces[i] = f"{name}={REDACTED}"
    return "".join(pieces)


def _redact_loose(url: str) -> str:
    """:func:`redact_url` for a URL that ``urlsplit`` cannot read (a port that is not a number, an
    unclosed IPv6 bracket): the user-info, up to the last ``@`` of the authority, and the key-like
    parameters of the query and the fragment, found by their delimiters."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    tail, hash_, fragment = tail.partition("#")
    path, qmark, query = tail.partition("?")
    return f"{scheme}://{netloc}{path}{qmark}{_redact_params(query)}{hash_}{_redact_params(fragment)}"


def redact_url(url: str) -> str:
    """``url`` with its user-info (``user:password@``) and the values of key-like parameters
    (:data:`SECRET_PARAMS`, and names ending in ``_key``, ``_token``, ``_secret``, ``_password``,
    ``_signature``) in its query and its fragment (``#access_token=...``), separated by ``&`` or
    ``;``, replaced by ``***``; scheme, host, port, path and the other parameters are kept. A URL
    whose port or host does not parse is redacted by its delimiters; a text without a URL's parts
    is returned unchanged."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is not a number, an unclosed IPv6 bracket
        return _redact_loose(url)
    netloc = parts.netloc
    if "@" in netloc:
        host = parts.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        netloc = f"{REDACTED}@{host}" + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, _redact_params(parts.query), _redact_params(parts.fragment)))


def _urls(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the URLs in ``text``: a scheme (a letter, then letters, digits,
    ``+``, ``.``, ``-``), ``://`` and a run of characters that are not white space, quotes, ``<``,
    ``>`` or a back-tick; leftmost first, not overlapping. Found from each ``://`` outwards, so the
    time is linear in the text's length (a regular expression trying a scheme at every letter is
    quadratic on a long word)."""
    spans: list[tuple[int, int]] = []
    rev = text[::-1]
    n = len(text)
    last = 0  # the end of the previous URL: the next one starts at or after it
    at = text.find("://")
    while at >= 0:
        run = _SCHEME_CHARS.match(rev, n - at)
        lo = max(last, at - (run.end() - run.start() if run else 0))
        letter = _LETTER.search(text, lo, at)
        tail = _URL_TAIL.match(text, at + 3)
        if letter is None or tail is None:
            at = text.find("://", at + 1)
            continue
        spans.append((letter.start(), tail.end()))
        last = tail.end()
        at = text.find("://", last)
    return spans


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted by :func:`redact_url` (a command line, a message)."""
    if "://" not in text:
        return text
    out, pos = [], 0
    for start, end in _urls(text):
        out += [text[pos:start], redact_url(text[start:end])]
        pos = end
    out.append(text[pos:])
    return "".join(out)


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
