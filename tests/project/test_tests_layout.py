"""The project's tests mirror the package (tests/README.md): unit tests under ``tests/unit/``,
a folder per subpackage of ``pytest_posbias``, end-to-end runs in ``tests/e2e/`` and checks on
the repository in ``tests/project/``; every test folder is a package, so that two test files of
the same name in different folders do not clash when pytest imports them."""

from __future__ import annotations

from pathlib import Path

from support import PACKAGE, TESTS

AREAS = ("unit", "e2e", "project")


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts)


def test_every_test_file_lies_in_an_area():
    misplaced = [p.relative_to(TESTS).as_posix() for p in _test_files() if p.relative_to(TESTS).parts[0] not in AREAS]
    assert not misplaced, f"test files outside tests/unit, tests/e2e and tests/project: {misplaced}"


def test_unit_folders_name_subpackages_of_the_package():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    folders = {p.name for p in (TESTS / "unit").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders, "tests/unit has no subpackage folder"
    assert folders <= subpackages, f"tests/unit folders that are no subpackage of pytest_posbias: {sorted(folders - subpackages)}"


def test_every_test_folder_is_a_package():
    folders = {p.parent for p in _test_files()}
    missing = [f.relative_to(TESTS).as_posix() for f in sorted(folders) if not (f / "__init__.py").is_file()]
    assert not missing, f"test folders without __init__.py (same-named files would clash): {missing}"
