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
  TORCH_SPEC="${POSBIAS_TORCH_SPEC-torch==2.14.1 torchvision==0.29.1}"
  if [ -n "$TORCH_SPEC" ] && ! python -c "import torch, torchvision" 2>/dev/null; then
    # shellcheck disable=SC2086
    python -m pip install -q $TORCH_SPEC
  fi
  python -m pip install -q -e ".[all,dev,test,docs]"
  # lmms-eval 0.7.3 for tests/unit/video/test_samplers_upstream.py: one module (load_video.py) is imported,
  # so none of its heavy dependencies (which would pull a newer torch) are installed
  python -m pip install -q --no-deps "lmms-eval==0.7.3"
  echo "$want" > "$stamp"
fi
