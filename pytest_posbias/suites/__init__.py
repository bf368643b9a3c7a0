"""The ready-made robustness suites, shipped in the wheel: ``pytest --pyargs pytest_posbias.suites``.

**Where suite files live.** Every suite's code lives here, in ``pytest_posbias/suites/``, and
only here (one copy): ``conftest.py`` (the parametrization hooks) and one ``test_<suite>.py``
module per suite. A new suite is a new ``test_<name>.py`` in this package and its record in
``pytest_posbias.gate_registry.SUITE_SPECS`` (with the kind of manifest item it needs).

They are reached three ways, all running this same code:

* ``pytest --pyargs pytest_posbias.suites -m meg --posbias-model ...`` from any directory (pytest
  loads this package's ``conftest.py`` because it collects this directory; the short ``--model``
  exists only where a root ``conftest.py`` registers it, as ``posbias init`` writes it);
* a folder scaffolded by ``posbias init`` in the user's repository: a ``conftest.py`` that
  re-exports this package's hooks (the root ``conftest.py`` adds the short options) and ``test_*.py`` modules that
  import the suites' test functions (``from pytest_posbias.suites.test_positional import *``), so pytest collects them
  under the user's folder with the user's ``[tool.posbias]`` table;
* this repository's top-level ``suites/`` folder, which is exactly such a scaffolded folder
  (its ``pytest`` testpaths and ``scripts/main`` run it).

This package is test code: its modules import pytest (the one exception to "only the plugin
package imports pytest") and ``import pytest_posbias`` never imports it.
"""
