"""Unit tests of the package: a folder per subpackage, top-level modules here (``test_<module>.py``)."""
