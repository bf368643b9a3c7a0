"""Unit tests of ``pytest_posbias.models``, a file per module."""
