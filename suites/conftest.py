"""Robustness gates (pytest-posbias), scaffolded by `posbias init`.

The ready-made suites' code is in the installed package, ``pytest_posbias/suites/``; this
folder brings it in: the hooks below parametrize the suites from ``[tool.posbias]`` and the
command line, and each ``test_<suite>.py`` here imports that suite's tests. Put your own gates
in further ``test_*.py`` files beside them (fixtures ``posbias_run``, ``posbias_model``,
``posbias_gate``; see "Writing your own gate" in the docs, docs/custom-gates.md).
"""

from pytest_posbias.suites.conftest import (
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_generate_tests,
)

__all__ = ["pytest_collection_finish", "pytest_collection_modifyitems", "pytest_configure", "pytest_generate_tests"]
