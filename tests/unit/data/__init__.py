"""Unit tests of ``pytest_posbias.data``, a file per module."""
