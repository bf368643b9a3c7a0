"""Unit tests of ``pytest_posbias.gates``, a file per module."""
