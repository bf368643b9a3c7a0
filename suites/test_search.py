"""The ready-made suite ``pytest_posbias.suites.test_search`` (its code lives in the package)."""

from pytest_posbias.suites.test_search import *  # noqa: F403
