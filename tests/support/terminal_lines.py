"""A terminal reporter that keeps the lines written to it, for unit tests of what the plugin prints."""


class Lines:
    """A terminal reporter that keeps the lines written to it."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str, **markup: object) -> None:
        self.lines.append(line)
