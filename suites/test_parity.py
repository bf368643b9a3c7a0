"""The ready-made suite ``pytest_posbias.suites.test_parity`` (its code lives in the package)."""

from pytest_posbias.suites.test_parity import *  # noqa: F403
