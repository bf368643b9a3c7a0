"""The ``posbias`` command line: everything the suites do that makes sense without pytest.

Each subcommand lives in a small function; heavy modules are imported inside it so
``posbias --help`` stays fast and needs no optional extra.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .. import __version__
from ..errors import PosbiasError

Handler = Callable[[argparse.Namespace], int]


def _register(sub: argparse._SubParsersAction, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(_cmd=name, _handler=handler)
    return p


def build_parser() -> argparse.ArgumentParser:
    """The ``posbias`` parser with every subcommand, in the order ``posbias --help`` lists them."""
    from ..run import retention
    from ..video.samplers import listing as samplers_listing
    from . import commands, plan, scaffold, sim_check

    parser = argparse.ArgumentParser(prog="posbias", description="pytest-posbias: video LLM robustness gates")
    parser.add_argument("--version", action="version", version=f"pytest-posbias {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (commands, sim_check, plan, samplers_listing, scaffold, retention):
        module.register(sub, _register)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``posbias`` console script."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plan"]:  # posbias plan passes pytest's options through: parse only its own
        from .plan import split_args

        own, rest = split_args(argv[1:])
        args = parser.parse_args(["plan", *own])
        args.pytest_args = rest
    else:
        args = parser.parse_args(argv)
    if not getattr(args, "_cmd", None):
        parser.print_help()
        return 2
    try:
        return int(args._handler(args))
    except PosbiasError as exc:
        print(f"posbias {args._cmd}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file the user named: missing, unreadable, a folder, no space left
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"posbias {args._cmd}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
