# Create (once) and activate the project's virtual environment with every extra installed.
# Sourced by scripts/test and scripts/main; safe to run on a fresh clone.
#
#   POSBIAS_PYTHON      interpreter to build the venv from (default python3; needs >= 3.11)
#   POSBIAS_TORCH_SPEC  torch pins installed before the package (default: the CPU machine's
#                       local torch==2.14.1 torchvision==0.29.1; set to "" on a GPU runner
#                       that already has its own torch in the environment)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${POSBIAS_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  "${POSBIAS_PYTHON:-python3}" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
export PIP_DISABLE_PIP_VERSION_CHECK=1
stamp="$VENV/.posbias-installed"
want="$(cat pyproject.toml scripts/env.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # uv installs the ~170 packages (torch and its CUDA libraries among them) in parallel; it reads no
  # pip configuration, so pip's find-links directory is passed on. --compile-bytecode writes the
  # .pyc files at install, as pip does by default and uv does not: where PYTHONDONTWRITEBYTECODE
  # is set, every interpreter the tests start would otherwise compile scipy, torch and
  # transformers from source again.
  python -m pip install -q "uv==0.13.9"
  links=()
  for d in ${PIP_FIND_LINKS:-$([ -d /opt/wheels ] && echo /opt/wheels)}; do links+=(--find-links "$d"); done
  uv_install() { "$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python" "${links[@]}" "$@"; }
  TORCH_SPEC="${POSBIAS_TORCH_SPEC-torch==2.14.1 torchvision==0.29.1}"
  if [ -n "$TORCH_SPEC" ] && python -c "import torch, torchvision" 2>/dev/null; then
    TORCH_SPEC=""  # the environment's own torch stays
  fi
  # the torch pins and the package in one resolution, so nothing the package needs moves torch
  # shellcheck disable=SC2086
  uv_install $TORCH_SPEC -e ".[all,dev,test,docs]"
  # lmms-eval 0.7.3 for tests/unit/video/test_samplers_upstream.py: one module (load_video.py) is imported,
  # so none of its heavy dependencies (which would pull a newer torch) are installed
  uv_install --no-deps "lmms-eval==0.7.3"
  echo "$want" > "$stamp"
fi
