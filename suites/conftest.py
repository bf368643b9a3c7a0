"""This repository's run of the ready-made suites: a thin folder, as ``posbias init`` makes one.

The suites' code lives in the package, ``pytest_posbias/suites/`` (shipped in the wheel); this
folder only brings it in: the hooks below and one ``test_<suite>.py`` per suite that imports the
suite's test functions. Edit suites there, never here.
"""

from pytest_posbias.suites.conftest import pytest_collection_modifyitems, pytest_generate_tests

__all__ = ["pytest_collection_modifyitems", "pytest_generate_tests"]
