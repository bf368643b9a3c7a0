"""The backend factory (``run.backend_factory.load_backend``): each model kind gets its backend, an
endpoint is checked as it is loaded (its facts go to the run log's model record), and a failed check
closes the backend it opened and propagates, naming the URL."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models.registry import resolve
from pytest_posbias.run.backend_factory import load_backend
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video.frames import FrameStore


def _load(spec: str, tmp_path, **options):
    return load_backend(resolve(spec), options=RunOptions(**options), store=FrameStore(), worker="gw0",
                        run_dir=tmp_path, notify=lambda line: None)


def test_a_sim_spec_loads_the_simulator_with_no_facts(tmp_path):
    from pytest_posbias.models.sim import SimBackend

    backend, facts = _load("sim:unbiased", tmp_path)
    assert isinstance(backend, SimBackend) and facts == {}


def test_under_posbias_plan_no_model_is_loaded(tmp_path):
    from pytest_posbias.models.plan import PlanBackend

    backend, facts = _load("sim:unbiased", tmp_path, plan=str(tmp_path / "plan.jsonl"))
    assert isinstance(backend, PlanBackend) and facts == {}


def test_loading_the_simulator_imports_no_heavy_backend():
    code = ("import sys, tempfile, pathlib; from pytest_posbias.models.registry import resolve; "
            "from pytest_posbias.run.backend_factory import load_backend; "
            "from pytest_posbias.run_options import RunOptions; from pytest_posbias.video.frames import FrameStore; "
            "load_backend(resolve('sim:unbiased'), options=RunOptions(), store=FrameStore(), worker='main', "
            "run_dir=pathlib.Path(tempfile.mkdtemp()), notify=print); "
            "print(sorted(m for m in ('torch', 'transformers', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_endpoint_is_checked_as_it_is_loaded_and_its_check_recorded(tmp_path):
    pytest.importorskip("openai")
    from support.fault_server import FaultServer

    with FaultServer() as srv:
        backend, facts = _load("openai:x", tmp_path, api_base=srv.url)
        try:
            assert set(facts) == {"check"} and facts["check"]
            assert srv.url in str(facts["check"])
        finally:
            backend.close()


def test_a_failed_check_closes_the_backend_and_names_the_url(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from support.fault_server import FaultServer

    from pytest_posbias.models.openai_backend import OpenAIBackend

    closed: list[object] = []
    close = OpenAIBackend.close
    monkeypatch.setattr(OpenAIBackend, "close", lambda self: (closed.append(self), close(self))[1])
    with FaultServer(served=("another-model",)) as srv, pytest.raises(ModelLoadError) as err:
        _load("openai:x", tmp_path, api_base=srv.url)
    assert srv.url in str(err.value) and len(closed) == 1
