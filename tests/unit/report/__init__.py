"""Unit tests of ``pytest_posbias.report``, a file per module."""
