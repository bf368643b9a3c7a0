"""Retries of the OpenAI-compatible backend (models.openai_retry): backoff delays grow with jitter, and
a URL loses its credentials before it is shown."""

from __future__ import annotations

import random

import pytest

from pytest_posbias.errors import BackendError
from pytest_posbias.models.openai_retry import sanitize_url, with_retries


def test_backoff_delays_grow_with_jitter():
    import httpx
    import openai

    delays: list[float] = []
    calls = {"n": 0}

    def fail():
        calls["n"] += 1
        raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))

    with pytest.raises(BackendError, match="after 5 attempts"):
        with_retries(fail, retries=4, base_delay=1.0, max_delay=5.0, rng=random.Random(3), sleep=delays.append)
    assert calls["n"] == 5 and len(delays) == 4
    for k, d in enumerate(delays):
        nominal = min(5.0, 2.0**k)
        assert 0.5 * nominal <= d <= 1.5 * nominal


def test_sanitize_url_drops_credentials():
    assert sanitize_url("https://user:pw@host.example:8443/v1?key=abc#x") == "https://host.example:8443/v1"


def test_sanitize_url_keeps_an_ipv6_literal_bracketed():
    """An IPv6 base URL keeps its brackets, so the logged URL still names the host and port."""
    assert sanitize_url("http://user:pw@[::1]:8000/v1?token=t") == "http://[::1]:8000/v1"


def test_a_malformed_body_is_retried_and_the_final_error_hides_the_key():
    """A ValueError (malformed 200 body) is retried; the final error names the cause without the key."""
    calls = []

    def fn():
        calls.append(1)
        raise ValueError("bad body from http://u:sk-KEY@host/v1?api_key=sk-KEY")

    with pytest.raises(BackendError) as info:
        with_retries(fn, retries=2, base_delay=0.0, sleep=lambda s: None, secret="sk-KEY", context="openai:m")
    assert len(calls) == 3 and "sk-KEY" not in str(info.value) and "after 3 attempts" in str(info.value)
    assert "sk-KEY" not in info.value.server_message


def test_the_final_error_hides_the_key_given_with_a_line_break():
    """A key handed over with its trailing line break is redacted also where an error quotes it bare."""
    def fn():
        raise ValueError("Illegal header value b'Bearer sk-KEY\\r' (key sk-KEY)")

    with pytest.raises(BackendError) as info:
        with_retries(fn, retries=0, sleep=lambda s: None, secret="sk-KEY\r")
    assert "sk-KEY" not in str(info.value) and "sk-KEY" not in info.value.server_message


@pytest.mark.parametrize("key", ["sk-SECRET-one\nsk-SECRET-two", "sk-SECRET\rx", "sk-SECRET\x1bx"])
def test_a_key_with_a_control_character_inside_is_a_model_load_error_that_never_quotes_it(monkeypatch, key):
    """A key with a line break inside (two lines of a file) stops the run at start; the HTTP client's error quoted it."""
    from pytest_posbias.errors import ModelLoadError
    from pytest_posbias.models.openai_retry import api_key

    monkeypatch.setenv("POSBIAS_API_KEY", key)
    with pytest.raises(ModelLoadError, match="POSBIAS_API_KEY") as info:
        api_key()
    assert "SECRET" not in str(info.value)


def test_a_key_is_read_without_the_white_space_around_it(monkeypatch):
    """POSBIAS_API_KEY with a line break is the bare key; a blank one falls back to OPENAI_API_KEY, then 'EMPTY'."""
    from pytest_posbias.models.openai_retry import api_key

    monkeypatch.setenv("POSBIAS_API_KEY", " sk-KEY\r\n")
    assert api_key() == "sk-KEY"
    monkeypatch.setenv("POSBIAS_API_KEY", " \n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-OTHER\n")
    assert api_key() == "sk-OTHER"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert api_key() == "EMPTY"
