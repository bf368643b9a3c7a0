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
_HANDLERS: dict[str, Handler] = {}


def _register(sub: argparse._SubParsersAction, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    _HANDLERS[name] = handler
    p.set_defaults(_cmd=name)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posbias", description="pytest-posbias: video LLM robustness gates")
    parser.add_argument("--version", action="version", version=f"pytest-posbias {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from . import commands as cli_commands

    cli_commands.register_all(sub, _register)
    from . import sim_check

    sim_check.register(sub, _register)  # posbias sim check|calibrate
    from . import plan as plan_cli

    plan_cli.register(sub, _register)  # posbias plan
    from ..video.samplers import listing as samplers_listing

    samplers_listing.register(sub, _register)  # posbias samplers
    from . import scaffold

    scaffold.register(sub, _register)  # posbias init
    from ..run import retention

    retention.register(sub, _register)  # posbias cache prune
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
        return _HANDLERS[args._cmd](args)
    except PosbiasError as exc:
        print(f"posbias {args._cmd}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file the user named: missing, unreadable, a folder, no space left
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"posbias {args._cmd}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2

