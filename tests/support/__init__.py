"""Helpers shared by the tests (importable as ``support``: pytest puts ``tests/`` on ``sys.path``).

The repository's paths live here once, so that a test file's place in ``tests/`` never decides
what it finds: ``REPO`` (the checkout), ``TESTS`` (``tests/``), ``SUITES`` (the suite files a user's project copies),
``PACKAGE`` (``pytest_posbias/``), ``DATA`` (``tests/data``) and ``SYNTHETIC`` (the synthetic set's
folder, ``fixtures/synthetic``).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SUITES = REPO / "suites"
PACKAGE = REPO / "pytest_posbias"
DATA = TESTS / "data"
SYNTHETIC = REPO / "fixtures" / "synthetic"
