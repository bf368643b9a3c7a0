"""data layer of pytest-posbias."""
