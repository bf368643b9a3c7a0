"""The ready-made robustness suites, shipped in the wheel: ``pytest --pyargs pytest_posbias.suites``.

The suites' only copy: ``conftest.py`` (the parametrization hooks) and one ``test_<suite>.py`` per
suite, recorded in ``pytest_posbias.gate_registry.SUITE_SPECS`` (with the kind of manifest item it
needs). A folder made by ``posbias init``, as this repository's ``suites/``, re-exports the hooks
and imports the test functions, so pytest collects them there with that project's
``[tool.posbias]`` (docs/getting-started.md, "Where the suites live"). This package is test code:
its modules import pytest, and ``import pytest_posbias`` never imports it.
"""
