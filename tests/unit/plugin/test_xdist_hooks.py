"""``plugin.xdist_hooks``: under ``pytest -n N`` the probe-group scheduler for a posbias run only
(another project's run, or a ``--dist`` the user chose, is xdist's own), the run id and vLLM
servers handed to each worker, and the ``vllm:`` servers started once on the controller and all
stopped when one of them fails to start."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.plugin.state import WORKERINPUT_GATES_ASKED, WORKERINPUT_VLLM, plugin_of
from pytest_posbias.plugin.xdist_hooks import configure_node, make_scheduler, start_vllm_for_workers, stop_vllm
from pytest_posbias.plugin.xdist_scheduler import ProbeGroupScheduling


class FakeServer:
    """A started vLLM model as the hooks read it: its spec, URLs, identity and stop()."""

    def __init__(self, spec: str, urls: list[str]) -> None:
        self.resolved = SimpleNamespace(spec=spec)
        self.urls = urls
        self.stopped = 0

    def identity(self) -> dict[str, str]:
        return {"served": self.resolved.spec}

    def stop(self) -> None:
        self.stopped += 1


def test_a_posbias_run_gets_the_probe_group_scheduler(pytester: pytest.Pytester):
    """-n without --dist in a posbias run: ProbeGroupScheduling."""
    pytest.importorskip("xdist")
    config = pytester.parseconfigure("-n", "2", "--posbias-model", "sim:unbiased")
    config.option.tx = ["popen"] * 2  # what xdist's pytest_cmdline_main makes of -n 2
    assert isinstance(make_scheduler(config, None), ProbeGroupScheduling)


@pytest.mark.parametrize("args", [("-n", "2"), ("-n", "2", "--posbias-model", "sim:unbiased", "--dist", "loadfile")],
                         ids=["another-project", "dist-given"])
def test_xdist_keeps_its_own_scheduler_for_another_project_or_a_chosen_dist(pytester: pytest.Pytester, args):
    """make_scheduler: None (xdist decides) when the run is not a posbias run, or --dist was given."""
    pytest.importorskip("xdist")
    assert make_scheduler(pytester.parseconfigure(*args), None) is None


def test_each_worker_gets_the_run_id_and_the_servers(fake_config):
    """configure_node: every worker writes into the controller's run folder and reaches the controller's vLLM servers."""
    config = fake_config(run_id="r-ctl")
    plugin_of(config).vllm = [FakeServer("vllm:m", ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"])]
    node = SimpleNamespace(config=config, workerinput={"workerid": "gw0"})
    configure_node(node)
    assert node.workerinput["posbias_run_id"] == "r-ctl"
    assert node.workerinput[WORKERINPUT_GATES_ASKED] is False  # no test path, -m, -k or posbias option given
    assert node.workerinput[WORKERINPUT_VLLM] == {"vllm:m": {"urls": ["http://127.0.0.1:8001/v1",
                                                                       "http://127.0.0.1:8002/v1"],
                                                              "identity": {"served": "vllm:m"}}}


def test_stop_vllm_stops_every_server_once(fake_config):
    """stop_vllm: each server stopped, the list emptied (a second call stops nothing again)."""
    config = fake_config()
    servers = [FakeServer("vllm:a", []), FakeServer("vllm:b", [])]
    plugin_of(config).vllm = list(servers)
    stop_vllm(config)
    stop_vllm(config)
    assert [s.stopped for s in servers] == [1, 1] and plugin_of(config).vllm == []


@pytest.mark.parametrize("options", [{}, {"--collect-only": True}], ids=["serial", "collect-only"])
def test_no_server_is_started_serially_or_for_a_collection(fake_config, monkeypatch, options):
    """A serial run starts its servers when it loads the model, a --collect-only calls none: nothing here."""
    from pytest_posbias.models import vllm_managed

    monkeypatch.setattr(vllm_managed, "start_managed", lambda *a, **k: pytest.fail("a server was started"))
    dist = {} if not options else {"dist": "load"}
    start_vllm_for_workers(fake_config({"--posbias-model": ["vllm:m"], **options}, **dist))


def test_a_server_that_fails_to_start_stops_the_others_and_is_a_usage_error(fake_config, monkeypatch):
    """Fail-closed: the second vllm: model fails to start; the first is stopped and the run stops
    with a usage error carrying the start failure."""
    from pytest_posbias.models import registry, vllm_managed

    started: list[FakeServer] = []

    def start(resolved, options, *, log_dir, progress=None):
        if resolved.spec == "vllm:b":
            raise ModelLoadError("--posbias-model vllm:b: the server exited before it was healthy")
        started.append(FakeServer(resolved.spec, ["http://127.0.0.1:9/v1"]))
        return started[-1]

    monkeypatch.setattr(registry, "resolve", lambda spec, **k: SimpleNamespace(spec=spec))
    monkeypatch.setattr(vllm_managed, "start_managed", start)
    config = fake_config({"--posbias-model": ["vllm:a", "vllm:b"]}, dist="load")
    with pytest.raises(pytest.UsageError, match="vllm:b: the server exited before it was healthy"):
        start_vllm_for_workers(config)
    assert [s.stopped for s in started] == [1] and plugin_of(config).vllm == []
