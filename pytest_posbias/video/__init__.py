"""video layer of pytest-posbias."""
