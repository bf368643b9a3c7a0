"""What one pytest process knows of a run, from its start to its end.

* :mod:`.context` — the :class:`~.context.RunContext` the suites' tests ask (options, cache, frame
  store, run log, backends, memoized probe results), with :mod:`.backend_factory` (a loaded
  backend per model spec);
* :mod:`.suite_params` — what the ready-made suites are parametrized over and how their tests
  group into probe groups; :mod:`.xdist_support` — one probe group per ``pytest -n N`` worker;
* :mod:`.cache_check` — the cache folder checked at the start, before any model call;
* :mod:`.run_id`, :mod:`.merge`, :mod:`.finish`, :mod:`.retention` — the run's folder, one run
  log from the workers' logs, the end of the run (merged log, verdicts, report) and the pruning
  of old run folders.

No module here imports pytest; the plugin (:mod:`pytest_posbias.plugin`) calls them.
"""
