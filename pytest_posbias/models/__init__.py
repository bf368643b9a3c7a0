"""models layer of pytest-posbias."""
