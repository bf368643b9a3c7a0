"""Text that leaves a run (safe_text): URL credentials and key-like parameters redacted in texts,
command lines and structures; control, bidi, NUL and lone-surrogate characters made inert; Markdown
code and text that cannot be closed or open a tag, span or link from inside."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_posbias.safe_text import (
    inert,
    is_inert,
    md_code,
    md_text,
    redact_args,
    redact_text,
    redact_url,
    redact_value,
)


@pytest.mark.parametrize(("url", "expected"), [
    ("http://user:sk-123@host:8000/v1", "http://***@host:8000/v1"),
    ("http://sk-123@host/v1", "http://***@host/v1"),
    ("http://host/v1?api-key=sk-123", "http://host/v1?api-key=***"),
    ("http://host/v1?api_key=sk-1&model=m&token=t", "http://host/v1?api_key=***&model=m&token=***"),
    ("https://h/v1?sig=s&signature=s&password=p&secret=s&access_token=a&key=k",
     "https://h/v1?sig=***&signature=***&password=***&secret=***&access_token=***&key=***"),
    ("https://h/v1?X-Amz-Signature=abc&page=2", "https://h/v1?X-Amz-Signature=***&page=2"),
    ("https://u:p@[::1]:9/v1?my_api_key=z#frag", "https://***@[::1]:9/v1?my_api_key=***#frag"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
])
def test_redact_url_removes_user_info_and_key_like_parameters(url, expected):
    assert redact_url(url) == expected


def test_redaction_in_texts_command_lines_and_structures():
    secret = "sk-live-0123456789"
    args = ["-m", "meg", f"--posbias-api-base=http://me:{secret}@h/v1", "--posbias-api-base", f"http://h/v1?api-key={secret}"]
    assert not any(secret in a for a in redact_args(args))
    assert redact_args(args)[:2] == ["-m", "meg"]
    assert redact_text(f"endpoint http://me:{secret}@h/v1 failed; see https://docs.x/y") == \
        "endpoint http://***@h/v1 failed; see https://docs.x/y"
    nested = {"api_base": [f"http://h/v1?token={secret}"], "n": 3, "ok": None, f"http://a:{secret}@k": "v"}
    assert secret not in json.dumps(redact_value(nested)) and redact_value(nested)["n"] == 3
    assert redact_text("no url here: user:pass@host") == "no url here: user:pass@host"  # only URLs are rewritten


def test_inert_escapes_controls_bidi_nul_and_lone_surrogates_and_keeps_the_rest():
    hostile = "a\u202eb\x00c\x1b[31md\u2066e\u200ff\x85g\ud800h\tok\nline é 中"
    out = inert(hostile)
    assert out == "a\\u202eb\\x00c\\x1b[31md\\u2066e\\u200ff\\x85g\\ud800h\tok\nline é 中"
    assert is_inert(out) and not is_inert(hostile)
    out.encode("utf-8")  # a lone surrogate could not be written to a file
    assert inert("x\ty\nz", newlines=False) == "x\\ty\\nz"


@pytest.mark.parametrize("text", ["a`b", "``x``", "`", "a```b`", "x|y", "<img src=x onerror=alert(1)>", "a\u202eb"])
def test_md_code_cannot_be_closed_from_inside(text):
    span = md_code(text)
    fence = len(span) - len(span.lstrip("`"))
    inner = span[fence:-fence]
    assert span.startswith("`" * fence) and span.endswith("`" * fence)
    assert "`" * fence not in inner  # no back-tick run inside as long as the fence: nothing closes it early
    assert "|" not in inner.replace("\\|", "")  # a table cell is not split
    assert is_inert(inner)


def test_md_text_opens_no_tag_span_or_link():
    out = md_text("<img src=x onerror=alert(1)> `code` *em* [l](javascript:x) a|b & \u202e\nnext")
    assert "<" not in out and ">" not in out and "&lt;img" in out and "&amp;" in out
    assert "\\`code\\`" in out and "\\*em\\*" in out and "\\[l\\]" in out and "a\\|b" in out
    assert "\\u202e" in out and "\n" not in out


@pytest.mark.parametrize("url", ["http://host:abc/v1?api_key=sk-LEAK", "http://host:99999/v1?token=sk-LEAK",
                                 "http://[::1/v1?key=sk-LEAK"])
def test_query_secrets_are_redacted_in_a_url_with_a_bad_port(url):
    """A key-like query parameter is redacted even when the URL's port or host does not parse."""
    assert "sk-LEAK" not in redact_url(url)
    assert "sk-LEAK" not in redact_text(f"request to {url} failed")


def test_a_token_in_the_url_fragment_is_redacted():
    """Key-like parameters in the fragment (#access_token=...) are redacted like query parameters."""
    assert "sk-LEAK" not in redact_url("https://host/callback#access_token=sk-LEAK&state=1")


def test_a_secret_after_a_semicolon_separator_is_redacted():
    """A key-like parameter after a ';' query separator is redacted."""
    assert "sk-LEAK" not in redact_url("http://host/v1?model=m;api_key=sk-LEAK")


def test_redaction_of_user_info_edge_forms():
    """Empty user, upper-case scheme, an '@' inside the password and repeated key parameters are all redacted."""
    for url in ("http://:sk-LEAK@host/v1", "HTTP://USER:sk-LEAK@HOST/v1", "http://u:p@sk-LEAK@host/v1",
                "http://host/v1?api_key=sk-LEAK&api_key=sk-LEAK", "http://u:sk-LEAK@host:abc/v1"):
        assert "sk-LEAK" not in redact_url(url), url


def test_redact_text_is_fast_on_a_long_word_beside_a_url():
    """Redacting a text of a 20,000-letter word and a URL takes well under a second."""
    import time

    text = "ha" * 10_000 + " see http://u:sk-LEAK@host/v1"
    t0 = time.perf_counter()
    out = redact_text(text)
    assert time.perf_counter() - t0 < 0.1
    assert "sk-LEAK" not in out


_OLD_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")


@given(st.lists(st.sampled_from(["http", "://", "a1", "1", "+.-", " ", "x", "@", "?k=v", "'", "#", "/"]),
                max_size=14).map("".join))
def test_the_linear_url_finder_finds_what_the_url_pattern_finds(text):
    """The URLs redact_text rewrites are the matches of the pattern a scheme, '://' and a tail describe."""
    from pytest_posbias.safe_text import _urls

    assert _urls(text) == [m.span() for m in _OLD_URL.finditer(text)]
