"""probes layer of pytest-posbias."""
