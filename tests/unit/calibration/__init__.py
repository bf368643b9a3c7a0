"""Unit tests of ``pytest_posbias.calibration``, a file per module."""
