"""The ready-made suite ``pytest_posbias.suites.test_stressors`` (its code lives in the package)."""

from pytest_posbias.suites.test_stressors import *  # noqa: F403
