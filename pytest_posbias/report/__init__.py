"""report layer of pytest-posbias."""
