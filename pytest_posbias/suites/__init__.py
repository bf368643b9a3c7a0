"""The ready-made robustness suites, shipped in the wheel: ``pytest --pyargs pytest_posbias.suites``
(one ``test_<suite>.py`` per ``pytest_posbias.gate_registry.SUITE_SPECS`` entry; docs/getting-started.md,
"Where the suites live"). This package is test code: its modules import pytest, and ``import
pytest_posbias`` never imports it.
"""
