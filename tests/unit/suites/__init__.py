"""Unit tests of ``pytest_posbias.suites``: the suites' own hooks (``suites/conftest.py``)."""
