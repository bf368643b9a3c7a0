"""models.openai_check: the start-up check of the openai backend against a real loopback server
(support.fault_server): the input form it settles, the fallbacks it allows, and the run-stopping errors that
name the URL, the model and the server's own words."""

from __future__ import annotations

import re
import socket

import pytest

pytest.importorskip("openai")

from support.fault_server import FaultServer

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models.openai_backend import OpenAIBackend
from pytest_posbias.models.openai_check import check
from pytest_posbias.models.openai_retry import TOP_LOGPROBS
from pytest_posbias.video.frames import FrameStore

KEY = "sk-test-check-7d1e"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("POSBIAS_API_KEY", KEY)


def _backend(url, model="x", **kw) -> OpenAIBackend:
    return OpenAIBackend(model, FrameStore(), api_base=url, timeout=2.0, **kw)


def test_a_healthy_endpoint_takes_the_video_form_and_scores_from_logprobs():
    """One one-token request showing frames as a video, with top_logprobs: the backend keeps the video form."""
    with FaultServer() as srv:
        b = _backend(srv.url)
        result = check(b)
        b.close()
    assert (result["input_form"], result["scoring"], result["attempts"]) == ("video", "logprobs", 1)
    assert b.input_form == "video" and result["url"] == srv.url and result["model"] == "x"
    [body] = srv.bodies
    assert body["max_tokens"] == 1 and body["top_logprobs"] == TOP_LOGPROBS and body["logprobs"] is True
    assert [p["type"] for p in body["messages"][0]["content"]] == ["video_url", "text"]


def test_an_image_only_endpoint_in_auto_form_falls_back_to_images_and_says_why():
    """auto: the video refused with HTTP 400, the images accepted; the refusal is recorded in the server's words."""
    with FaultServer(video=False) as srv:
        b = _backend(srv.url)
        result = check(b)
        b.close()
    assert result["input_form"] == b.input_form == "images" and result["attempts"] == 2
    assert "video_url is not supported" in result["video_refused"]
    assert [p["type"] for p in srv.bodies[1]["messages"][0]["content"]] == ["image_url", "text"]


def test_the_video_form_asked_for_on_an_image_only_endpoint_stops_the_run_with_the_way_out():
    """--posbias-video-form video refused: ModelLoadError with URL, model, status, the server's words and the hint."""
    with FaultServer(video=False) as srv:
        b = _backend(srv.url, video_form="video")
        with pytest.raises(ModelLoadError) as err:
            check(b)
        b.close()
    msg = str(err.value)
    assert msg.startswith(f"--posbias-model openai:x: the endpoint {srv.url} refused the start-up request (HTTP 400)")
    assert "video_url is not supported" in msg and "use images for image-only endpoints" in msg
    assert len(srv.bodies) == 1  # a permanent refusal is not retried


def test_a_model_the_endpoint_does_not_serve_lists_the_ones_it_does():
    """HTTP 404 for the model: the message lists the names GET /models reports."""
    with FaultServer(served=("qwen-a", "qwen-b")) as srv:
        b = _backend(srv.url, model="qwen-c")
        with pytest.raises(ModelLoadError, match=r"openai:qwen-c: .*\(HTTP 404\): The model `qwen-c` does not exist\.; "
                                                 r"models served there: qwen-a, qwen-b"):
            check(b)
        b.close()


def test_a_refused_key_names_the_variables_to_set_and_never_the_key():
    """HTTP 401: the hint names POSBIAS_API_KEY and OPENAI_API_KEY; the key itself appears nowhere."""
    with FaultServer(status=(401, f"Incorrect API key provided: {KEY}")) as srv:
        b = _backend(srv.url)
        with pytest.raises(ModelLoadError) as err:
            check(b)
        b.close()
    assert "(HTTP 401)" in str(err.value) and "set POSBIAS_API_KEY (or OPENAI_API_KEY)" in str(err.value)
    assert KEY not in str(err.value)


@pytest.mark.parametrize("tail", ["\r", "\n", "\r\n "])
def test_a_key_with_a_trailing_line_break_is_sent_stripped_and_never_quoted(monkeypatch, tail):
    """A key read with its line break passes the check (the header carries the bare key), and a refusal quoting the
    key does not show it."""
    monkeypatch.setenv("POSBIAS_API_KEY", KEY + tail)
    with FaultServer() as srv:
        b = _backend(srv.url)
        assert check(b)["attempts"] == 1
        b.close()
    with FaultServer(status=(401, f"Incorrect API key provided: {KEY}")) as srv:
        b = _backend(srv.url)
        with pytest.raises(ModelLoadError) as err:
            check(b)
        b.close()
    assert "(HTTP 401)" in str(err.value) and KEY not in str(err.value)


def test_a_server_refusing_top_logprobs_stops_the_run_with_the_max_logprobs_hint_not_an_images_fallback():
    """HTTP 400 about logprobs in auto form: no retry with images (the form is not the problem); the hint names
    vLLM's --max-logprobs and text scoring."""
    with FaultServer(max_logprobs=5) as srv:
        b = _backend(srv.url)
        with pytest.raises(ModelLoadError) as err:
            check(b)
        b.close()
    msg = str(err.value)
    assert "top_logprobs must be less than or equal to max_logprobs (5)" in msg
    assert "--max-logprobs 20" in msg and "--posbias-letter-scoring text" in msg
    assert len(srv.bodies) == 1


def test_no_logprobs_in_the_answer_switches_auto_scoring_to_text():
    """letter_scoring auto and an answer without logprobs: text scoring, and the record says why."""
    with FaultServer(logprobs=False) as srv:
        b = _backend(srv.url)
        result = check(b)
        b.close()
    assert result["scoring"] == b.scoring == "text" and b.supports_letter_logprobs is False
    assert f"top_logprobs={TOP_LOGPROBS}" in result["fallback"]


def test_no_logprobs_when_logprobs_were_demanded_stops_the_run():
    """letter_scoring logprobs and an answer without logprobs: ModelLoadError, never a silent switch to text."""
    with FaultServer(logprobs=False) as srv:
        b = _backend(srv.url, letter_scoring="logprobs")
        with pytest.raises(ModelLoadError, match=r"returned no logprobs .*--posbias-letter-scoring logprobs was asked"):
            check(b)
        b.close()
    assert b.scoring == "logprobs"


def test_text_scoring_does_not_ask_for_logprobs():
    """letter_scoring text: the start-up request carries no logprobs, so a server without them passes."""
    with FaultServer(logprobs=False, max_logprobs=0) as srv:
        b = _backend(srv.url, letter_scoring="text")
        result = check(b)
        b.close()
    assert result["scoring"] == "text" and "logprobs" not in srv.bodies[0] and "fallback" not in result


def test_transient_failures_are_retried_and_counted():
    """Two injected 503s, then an answer: the check passes after three attempts and says so."""
    with FaultServer(rates={"503": 1.0}, max_faults_per_request=2, video_only_faults=False) as srv:
        b = _backend(srv.url, video_form="images")
        result = check(b, budget_s=20.0)
        b.close()
    assert result["attempts"] == 3 and srv.outcomes["503"] == 2 and srv.outcomes["ok"] == 1


def test_an_endpoint_nobody_listens_on_stops_the_run_asking_whether_the_server_runs():
    """Connection refused: ModelLoadError naming the URL and asking whether the server is running."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    b = _backend(url, video_form="images")
    with pytest.raises(ModelLoadError, match=rf"the endpoint {url} cannot be reached or does not answer .*"
                                             r"is the server running at this URL\?"):
        check(b, budget_s=3.0)
    b.close()


def test_every_replica_must_take_the_form_the_first_one_took():
    """Two replicas, the second image-only: the first settles the video form and the second's refusal names it."""
    with FaultServer() as first, FaultServer(video=False) as second:
        b = _backend([first.url, second.url])
        with pytest.raises(ModelLoadError) as err:
            check(b)
        b.close()
    assert f"the endpoint {second.url} refused the start-up request (HTTP 400)" in str(err.value)
    assert len(first.bodies) == 1 and len(second.bodies) == 1  # no images retry on the second


def test_replicas_that_all_take_the_form_are_listed():
    """Two healthy replicas: each checked once, both listed in the record."""
    with FaultServer() as first, FaultServer() as second:
        b = _backend([first.url, second.url])
        result = check(b)
        b.close()
    assert result["replicas"] == [first.url, second.url] and result["attempts"] == 2
    assert len(first.bodies) == len(second.bodies) == 1


def test_logprobs_without_top_logprobs_switch_auto_scoring_to_text(monkeypatch):
    """A server that answers logprobs but ignores top_logprobs cannot score letters: auto scoring falls back to text."""
    import support.fault_server as fs

    full = fs.completion

    def bare(body):
        out = full(body)
        for tok in (out["choices"][0]["logprobs"] or {}).get("content") or []:
            tok["top_logprobs"] = []
        return out

    monkeypatch.setattr(fs, "completion", bare)
    with FaultServer() as srv:
        b = _backend(srv.url, letter_scoring="auto")
        found = check(b)
        b.close()
    assert b.scoring == "text" and not b.supports_letter_logprobs and "fallback" in found


class _AnswersAs(FaultServer):
    """A server that takes any model name and answers as the one it serves (LM Studio-like)."""

    def handle(self, h, body):
        return super().handle(h, {**body, "model": self.served[0]})


def test_a_replica_answering_as_another_model_stops_the_run_naming_both():
    """Two replicas whose answers name different models: ModelLoadError naming each URL and model, no run."""
    with FaultServer() as first, _AnswersAs(served=("other-model",)) as second:
        b = _backend([first.url, second.url])
        with pytest.raises(ModelLoadError) as err:
            check(b)
        b.close()
    msg = str(err.value)
    assert f"{first.url} answers as 'x'" in msg and f"{second.url} answers as 'other-model'" in msg


def test_a_replica_without_logprobs_fails_the_check_when_logprobs_are_demanded():
    """letter_scoring logprobs and one of two replicas answering without logprobs: ModelLoadError naming it."""
    with FaultServer(logprobs=False) as first, FaultServer() as second:
        b = _backend([first.url, second.url], letter_scoring="logprobs")
        with pytest.raises(ModelLoadError, match=rf"the endpoint {re.escape(first.url)} returned no logprobs"):
            check(b)
        b.close()


def test_auto_scoring_falls_back_to_text_when_any_replica_lacks_logprobs():
    """letter_scoring auto and the second of two replicas answering without logprobs: every answer is scored from text
    (requests routed to that replica would carry no letter scores), and the run log names the replica."""
    with FaultServer() as first, FaultServer(logprobs=False) as second:
        b = _backend([first.url, second.url], letter_scoring="auto")
        found = check(b)
        assert b.scoring == "text" and not b.supports_letter_logprobs
        assert second.url in found["fallback"] and first.url not in found["fallback"]
        b.close()
