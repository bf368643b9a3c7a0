"""What one pytest process knows of a run, from its start to its end: the run context the suites'
tests ask (:mod:`.context`, with :mod:`.backend_factory`), what the suites are parametrized over and
their probe groups (:mod:`.suite_params`, :mod:`.xdist_support`), the cache check at the start
(:mod:`.cache_check`), and the run's folder, merged log, end and retention (:mod:`.run_id`,
:mod:`.merge`, :mod:`.finish`, :mod:`.retention`).

No module here imports pytest; the plugin (:mod:`pytest_posbias.plugin`) calls them.
"""
