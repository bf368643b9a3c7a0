"""The backend factory: :func:`load_backend` loads the backend a resolved model spec names (``sim:``,
``openai:``, ``vllm:``, a Hugging Face checkpoint, or the plan recorder under ``posbias plan``);
each backend module is imported only when its kind is used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import Backend
from ..models.registry import ResolvedModel
from ..run_options import RunOptions
from ..video.frames import FrameStore

if TYPE_CHECKING:
    from ..models.openai_backend import OpenAIBackend


def load_backend(r: ResolvedModel, *, options: RunOptions, store: FrameStore, worker: str, run_dir: Path,
                 notify: Callable[[str], None]) -> tuple[Backend, dict[str, Any]]:
    """The loaded backend for ``r`` and the facts its run-log ``model`` record carries beside its
    identity (the endpoint check, the vLLM URLs, the device placement).

    ``store`` is the frame store every backend reads frames from, ``worker`` this process's xdist
    worker name, ``run_dir`` the run's folder (a managed vLLM server logs there), ``notify`` prints a
    line. An endpoint is checked at once: a failure (naming the URL and the server's message) closes
    the backend and propagates."""
    if options.plan:  # posbias plan: record the requests, call no model
        from ..models.plan import PlanBackend

        return PlanBackend(r, store, options.plan, worker=worker, output_lengths=options.plan_output_lengths), {}
    if r.backend == "sim":
        from ..models.sim import SimBackend

        return SimBackend(r.target, store), {}
    if r.backend == "openai":
        from ..models.openai_backend import make_backend

        b: OpenAIBackend = make_backend(r, store, options, notify=notify)
    elif r.backend == "vllm":  # served with vLLM for the run (or by the xdist controller)
        from ..models.vllm_managed import make_backend as make_vllm_backend

        b = make_vllm_backend(r, store, options, log_dir=run_dir, notify=notify)
    else:
        from ..models.hf import HFBackend

        hb = HFBackend(r, store, device=options.device, worker=worker, batch_size=options.batch_size or 4,
                       attn_implementation=options.attn_implementation, device_map=options.device_map)
        return hb, {"placement": hb.placement_info}
    try:  # fail at start, naming the URL and the server's message
        return b, {"check": b.check(), **({"vllm_urls": b.url} if r.backend == "vllm" else {})}
    except BaseException:
        b.close()
        raise
