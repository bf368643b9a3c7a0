"""Checks on the repository itself: docs, packaging, layout, typing layers, CI recipes, examples."""
