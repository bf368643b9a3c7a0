"""``python -m pytest_posbias.cli``: the ``posbias`` command line (:func:`pytest_posbias.cli.main`)."""

from __future__ import annotations

from . import main

raise SystemExit(main())
