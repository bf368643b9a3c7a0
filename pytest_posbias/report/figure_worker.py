"""A helper process of :mod:`.figure_pool`: draws the figure calls it reads on stdin.

Run as ``python -m pytest_posbias.report.figure_worker``. It imports matplotlib and the figure
functions at once (so a helper started early in a run is ready at its end), says so (``(True, "ready")``), then reads
length-prefixed pickled calls ``(name, args, kwargs)`` from stdin and answers each with
``(True, svg)`` or ``(False, "ExceptionType: message")`` on stdout, until stdin ends.
"""

from __future__ import annotations

import sys

from .figure_pool import draw_call, read_message, send_message


def main() -> int:
    from . import figures

    figures.warm_up()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    send_message(stdout, (True, "ready"))  # the parent sends no figure before this
    while True:
        try:
            call = read_message(stdin)
        except EOFError:
            return 0
        try:
            answer: tuple[bool, str] = (True, draw_call(call))
        except Exception as exc:  # the parent draws this figure again itself and gets the error there
            answer = (False, f"{type(exc).__name__}: {exc}")
        send_message(stdout, answer)


if __name__ == "__main__":
    sys.exit(main())
