"""Unit tests of ``pytest_posbias.stats``, a file per module."""
