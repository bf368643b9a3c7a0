"""Shared configuration of the ready-made suites (fixtures come from the pytest_posbias plugin)."""
