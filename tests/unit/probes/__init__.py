"""Unit tests of ``pytest_posbias.probes``, a file per module."""
