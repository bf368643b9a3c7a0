"""Unit tests of ``pytest_posbias.engine``, a file per module."""
