"""Unit tests of ``pytest_posbias.run``, a file per module."""
