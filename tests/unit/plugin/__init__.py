"""Unit tests of ``pytest_posbias.plugin``, a file per module."""
