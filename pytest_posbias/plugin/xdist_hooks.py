"""What the plugin does for ``pytest -n N`` on the controller: the probe-group scheduler, the run
id and vLLM servers handed to each worker, and the vLLM servers started once for all workers."""

from __future__ import annotations

from typing import Any

import pytest

from ..run.xdist_support import dist_given
from .checks import as_typed, gates_asked, posbias_asked
from .options import options, run_directory
from .state import WORKERINPUT_GATES_ASKED, WORKERINPUT_VLLM, plugin_of, posbias_config


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n N`` without ``--dist``: schedule by probe group
    (:class:`pytest_posbias.plugin.xdist_scheduler.ProbeGroupScheduling`, its module says how); with
    ``--posbias-cache-mode read-only`` (nothing is stored) the groups sharing a result are one scope. A
    ``--dist`` mode the user gave is xdist's own, and so is the scheduling of a run that is not a posbias
    run (:func:`.checks.posbias_asked`): another project's ``-n`` run is left to xdist."""
    if dist_given(config) or not posbias_asked(config):
        return None
    from ..probes.settings import settings_for
    from ..run.suite_params import group_weight, model_id, probe_group, shared_probes
    from .xdist_scheduler import ProbeGroupScheduling

    opts = options(config)
    model_ids = [model_id(m) for m in opts.models]
    baseline_id = model_id(opts.baseline) if opts.baseline else None
    parity_id = model_id(opts.parity) if opts.parity else None
    probes = posbias_config(config).probes
    settings = {name: settings_for(name, probes.get(name)) for name in ("positional", "phase", "stressor")}
    frames = settings["stressor"]["frames"]
    first = int(frames[0]) if frames else None
    return ProbeGroupScheduling(config, log,
                                group_of=lambda nodeid: probe_group(nodeid, model_ids=model_ids, search_frames=first),
                                weight_of=lambda scope: group_weight(scope, settings),
                                shares_of=lambda nodeid: shared_probes(nodeid, model_ids=model_ids,
                                                                       baseline_id=baseline_id, parity_id=parity_id,
                                                                       search_frames=first),
                                merge_shared=opts.cache_mode == "read-only")


def configure_node(node: Any) -> None:
    """xdist: every worker writes into the controller's run directory."""
    node.workerinput["posbias_run_id"] = plugin_of(node.config).run_id
    node.workerinput[WORKERINPUT_GATES_ASKED] = gates_asked(node.config)
    node.workerinput[WORKERINPUT_VLLM] = {m.resolved.spec: {"urls": m.urls, "identity": m.identity()}
                                          for m in plugin_of(node.config).vllm}


def start_vllm_for_workers(config: pytest.Config) -> None:
    """xdist controller: serve every ``vllm:`` model once for the run, before the workers start
    (they get the URLs through ``workerinput``); stopped in pytest_unconfigure. A serial run starts
    them when it loads the model (session.RunContext.backend)."""
    if (getattr(config, "workerinput", None) is not None or getattr(config.option, "dist", "no") == "no"
            or config.getoption("--collect-only", False) or config.getoption("--posbias-plan", None)):
        return
    opts = options(config)
    specs = [s for s in opts.specs if s.startswith("vllm:")]
    if not specs:
        return
    from ..errors import ModelLoadError
    from ..models.registry import resolve
    from ..models.vllm_managed import start_managed

    started: list[Any] = []
    plugin_of(config).vllm = started
    tr = config.pluginmanager.get_plugin("terminalreporter")
    try:
        for spec in specs:
            started.append(start_managed(resolve(spec), opts, log_dir=run_directory(config),
                                         progress=tr.write_line if tr is not None else None))
    except ModelLoadError as exc:
        stop_vllm(config)
        raise pytest.UsageError(as_typed(config, str(exc))) from None


def stop_vllm(config: pytest.Config) -> None:
    """Stop the servers :func:`start_vllm_for_workers` started."""
    for m in plugin_of(config).vllm:
        m.stop()
    plugin_of(config).vllm = []
