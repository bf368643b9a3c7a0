"""Files of another team's project that the plugin must leave as it found them: a conftest that
defines the short options the plugin would alias, and a pyproject.toml with tables of its own."""

GUEST_CONFTEST = """
import pytest

def pytest_addoption(parser):
    parser.addoption("--model", default="mine")
    parser.addoption("--baseline", default="base")

@pytest.fixture
def own(request):
    return request.config.getoption("--model"), request.config.getoption("--baseline")
"""

EXISTING_PYPROJECT = """# my project
[project]
name = "acme-vlm"   # keep this comment
version = "1.2.3"

[tool.pytest.ini_options]
testpaths = ["tests"]
markers = ["gpu: needs a GPU"]

[tool.ruff]
line-length = 120
"""
