"""Unit tests of ``pytest_posbias.cli``, a file per module."""
