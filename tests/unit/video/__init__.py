"""Unit tests of ``pytest_posbias.video``, a file per module."""
