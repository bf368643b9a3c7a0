"""Composing a multi-video prompt (video.compose): the black-frame layout with the prompt first, and
text labels one-indexed with the videos first."""

from __future__ import annotations

from pytest_posbias.video.compose import ImagePart, TextPart, VideoPart, compose, summary_prompt
from pytest_posbias.video.frames import FrameSpec


def test_compose_black_frame_layout_prompt_first(clip):
    path, _scene = clip
    spec = FrameSpec.from_video(path, [0, 10, 20])
    vids = [VideoPart(spec, video_id="a"), VideoPart(spec, video_id="b")]
    prompt = summary_prompt(2, sentences=4)
    parts = compose(vids, prompt=prompt, boundary="black")
    kinds = [p.kind for p in parts]
    assert kinds == ["text", "text", "video", "image", "text", "video"]
    assert parts[0] == TextPart(prompt)
    assert parts[1].text == "Video 0: 3 uniformly sampled frames"
    assert parts[4].text == "Video 1: 3 uniformly sampled frames"
    assert isinstance(parts[3], ImagePart) and parts[3].name == "black-separator"
    assert [p.video_id for p in parts if isinstance(p, VideoPart)] == ["a", "b"]
    assert prompt.startswith("Different videos in the input are separated by black frames. Summarize each video in 4 sentences.")
    assert "[video0] summary [video1] summary" in prompt


def test_compose_text_labels_video_first_one_indexed(clip):
    path, _ = clip
    spec = FrameSpec.from_video(path, [0, 10])
    vids = [VideoPart(spec, video_id=k) for k in "abcd"]
    parts = compose(vids, prompt="P", boundary="text", placement="video-first", label_base=1)
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    assert texts[0] == "Video 1: 2 uniformly sampled frames"
    assert "--- Text separator: end of Video 1; next is Video 2. ---" in texts
    assert texts[-1] == "P" and not any(isinstance(p, ImagePart) for p in parts)
    p4 = summary_prompt(4, sentences=2, boundary="text", news=True)
    assert "separated by text labels only. Summarize each news video in 2 sentences." in p4
    assert p4.endswith("[video0] summary [video1] summary ... [video3] summary")
