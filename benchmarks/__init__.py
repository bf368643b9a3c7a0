"""Benchmarks: scripts that print tables (speed and memory are measured here, not in tests)."""
