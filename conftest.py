"""Project-wide pytest configuration (root conftest.py)."""

# pytest-posbias: the short options of the robustness suites (--model, --baseline, --judge,
# --api-base) as aliases of the plugin's --posbias-* options.
import pytest

from pytest_posbias.plugin import add_short_aliases


@pytest.hookimpl(specname="pytest_addoption", trylast=True)
def pytest_addoption_posbias(parser):
    add_short_aliases(parser)
