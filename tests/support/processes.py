"""Live processes read from ``/proc`` (Linux), for the tests that check no server outlives its run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def _live() -> Iterator[tuple[int, list[bytes], list[str]]]:
    """(pid, command line, the fields of ``stat`` after the command name) of each live, non-zombie process."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
            stat = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone while read
        if stat[0] != "Z":  # a zombie is dead: its parent has not reaped it yet
            yield int(p.name), cmd, stat


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return [pid for pid, _, stat in _live() if int(stat[2]) == pgid]


def groups_naming(path: Path) -> set[int]:
    """The process groups of the live processes whose command line names ``path``."""
    return {int(stat[2]) for _, cmd, stat in _live() if str(path).encode() in cmd}


def alive(pid: int) -> bool:
    """Whether process ``pid`` is live (not gone, not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
