"""The ready-made suite ``pytest_posbias.suites.test_phase_order`` (its code lives in the package)."""

from pytest_posbias.suites.test_phase_order import *  # noqa: F403
