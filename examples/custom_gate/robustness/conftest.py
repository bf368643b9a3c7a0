"""As `posbias init` writes it: the ready-made suites' hooks, which also parametrize custom gates
that ask for the same fixtures (``positional_config_p4``, ``sampler_pair``, ...), and register
the suites' markers."""

from pytest_posbias.suites.conftest import (
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_generate_tests,
)

__all__ = ["pytest_collection_finish", "pytest_collection_modifyitems", "pytest_configure", "pytest_generate_tests"]
