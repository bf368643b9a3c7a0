"""scoring layer of pytest-posbias."""
