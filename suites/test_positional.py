"""The ready-made suite ``pytest_posbias.suites.test_positional`` (its code lives in the package)."""

from pytest_posbias.suites.test_positional import *  # noqa: F403
