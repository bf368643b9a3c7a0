"""Unit tests of ``pytest_posbias.scoring``, a file per module."""
