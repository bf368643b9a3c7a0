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
