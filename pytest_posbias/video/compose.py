"""Backend-neutral multi-video input: an ordered sequence of text, video and image parts in the
layouts of the multi-video paper, appendix A.1 (:func:`compose`): labelled clips separated by a
black image or a text separator, the task prompt first (the paper's main setting) or last, labels
counted from 0 or 1. Every backend keeps this order; the order is what the positional probes measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .frames import FrameSpec

BOUNDARIES = ("black", "text")
PLACEMENTS = ("prompt-first", "video-first")


@dataclass(frozen=True)
class TextPart:
    text: str
    kind: str = "text"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "text", "text": self.text}


@dataclass(frozen=True)
class VideoPart:
    """One video as a frame list with its metadata (fps, source indices, duration)."""

    frames: FrameSpec
    label: str = ""
    video_id: str = ""
    kind: str = "video"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "video", "label": self.label, "video_id": self.video_id, "frames": self.frames.to_dict()}


@dataclass(frozen=True)
class ImagePart:
    """A single image; ``black-separator`` is the blank boundary frame between clips."""

    name: str = "black-separator"
    size: int = 448
    kind: str = "image"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "image", "name": self.name, "size": self.size}


Part = TextPart | VideoPart | ImagePart


def part_from_dict(d: Mapping[str, Any]) -> Part:
    kind = d.get("kind")
    if kind == "text":
        return TextPart(str(d["text"]))
    if kind == "video":
        return VideoPart(FrameSpec.from_dict(d["frames"]), str(d.get("label", "")), str(d.get("video_id", "")))
    if kind == "image":
        return ImagePart(str(d.get("name", "black-separator")), int(d.get("size", 448)))
    raise ConfigError(f"unknown part kind {kind!r}")


def parts_key(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """The identity of a part sequence for request keys (content hashes, not paths)."""
    return [{"kind": "video", "frames": p.frames.key()} if isinstance(p, VideoPart) else p.to_dict() for p in parts]


def video_label(k: int, n_frames: int) -> str:
    """``Video k: N uniformly sampled frames`` (paper appendix A.1)."""
    return f"Video {k}: {n_frames} uniformly sampled frames"


def compose(
    videos: Sequence[VideoPart],
    *,
    prompt: str,
    boundary: str = "black",
    placement: str = "prompt-first",
    label_base: int = 0,
) -> list[Part]:
    """Parts for P videos in the given order (the caller has already ordered ``videos``)."""
    if boundary not in BOUNDARIES:
        raise ConfigError(f"`boundary` must be one of {BOUNDARIES}; got {boundary!r}")
    if placement not in PLACEMENTS:
        raise ConfigError(f"`placement` must be one of {PLACEMENTS}; got {placement!r}")
    if label_base not in (0, 1):
        raise ConfigError(f"`label_base` must be 0 or 1; got {label_base!r}")
    if not videos:
        raise ConfigError("`videos` must hold at least one VideoPart")
    body: list[Part] = []
    size = videos[0].frames.size or 448
    for slot, v in enumerate(videos):
        k = slot + label_base
        body += [TextPart(video_label(k, len(v.frames))), VideoPart(v.frames, label=f"Video {k}", video_id=v.video_id)]
        if slot < len(videos) - 1:
            body.append(ImagePart("black-separator", size) if boundary == "black"
                        else TextPart(f"--- Text separator: end of Video {k}; next is Video {k + 1}. ---"))
    task = TextPart(prompt)
    return [task, *body] if placement == "prompt-first" else [*body, task]


def _separated_by(boundary: str) -> str:
    return ("Different videos in the input are separated by black frames." if boundary == "black"
            else "Different videos in the input are separated by text labels only.")


def summary_prompt(P: int, *, sentences: int, boundary: str = "black", news: bool = False,
                   label_base: int = 0, equal_attention: bool = False) -> str:
    """The per-video summarization prompt of the multi-video paper, appendix A.1."""
    what = "each news video" if news else "each video"
    markers = " ".join(f"[video{k}] summary" for k in range(label_base, label_base + min(P, 2)))
    fmt = f"{markers} ... [video{label_base + P - 1}] summary" if P > 2 else markers
    text = (f"{_separated_by(boundary)} Summarize {what} in {sentences} sentences. Use exactly this format, "
            f"including the square brackets: {fmt}")
    if equal_attention:
        text += " Pay equal attention to every video, whatever its position in the input."
    return text


def single_target_prompt(P: int, target: int, *, sentences: int, boundary: str = "black",
                         news: bool = False, label_base: int = 0) -> str:
    """Single-target prompting (paper §5.2): ask for the summary of one labelled video only."""
    what = "news video" if news else "video"
    label = target + label_base
    return (f"{_separated_by(boundary)} Summarize only the {what} labelled Video {label} in {sentences} sentences. "
            f"Use exactly this format, including the square brackets: [video{label}] summary")
