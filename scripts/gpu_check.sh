#!/usr/bin/env bash
# The hf backend's CUDA path on a GPU runner, with nothing downloaded: a tiny random-weight
# checkpoint of every supported family (built offline by pytest_posbias.models.tiny) is loaded
# through the same --posbias-model=DIR path a real checkpoint takes, in bf16 on the GPU, and run
# through the ready-made suites of a `posbias init --quick` project as a user runs them; then
# benchmarks/hf_backend.py compares batched with one-at-a-time decoding on the GPU.
#
#   bash scripts/gpu_check.sh [OUT_DIR]      (default ./gpu-check)
#
#   PYTHON                 interpreter with torch (CUDA), transformers and the package's
#                          dependencies (default python3); PyAV is needed to render the clips
#   POSBIAS_GPU_DEVICE     device (default cuda:0)
#   POSBIAS_GPU_FAMILIES   families to check (default: every family of pytest_posbias.models.tiny)
#   POSBIAS_GPU_RUN_TIMEOUT  seconds each family's pytest run may take (default 1800)
#
# Per family it prints the run's exit status (a random-weight model's answers are mostly unusable,
# so 1 or 6 is expected: the subject is that the run decides on the GPU, not the verdicts), the
# model record of the run log (dtype, device, attention kernel), the calls made and their tokens,
# and "ok" where the run decided with the model in bf16 on the GPU (float32 with
# POSBIAS_GPU_DEVICE=cpu); the script exits 1 if any family is not ok.
# OUT_DIR holds each run's output, JSON summary and run log, and the benchmark's table.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mkdir -p "${1:-gpu-check}" && cd "${1:-gpu-check}" && pwd)" || exit 1
PY="${PYTHON:-python3}"
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # the runs change folder
DEVICE="${POSBIAS_GPU_DEVICE:-cuda:0}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
work="$(mktemp -d)" || exit 1
trap 'rm -rf "$work"' EXIT

# The package is imported from this checkout; nothing is installed into the interpreter's
# environment. Its pytest plugin is loaded by module name where no pytest-posbias is installed
# there (an installed one registers it through its entry point, which then imports the
# checkout's plugin, first on the path).
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
plugin=()
if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(not m.entry_points(group="pytest11", name="posbias"))'; then
  plugin=(-p pytest_posbias.plugin)
fi
posbias=("$PY" -m pytest_posbias.cli)

"$PY" - "$DEVICE" <<'PY' | tee "$OUT/environment.txt"
import sys

import torch
import transformers

dev = sys.argv[1]
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}")
if dev.startswith("cuda"):
    if not torch.cuda.is_available():
        sys.exit(f"{dev}: torch sees no CUDA device")
    print(f"{dev}: {torch.cuda.get_device_name(dev)}, bf16 supported: {torch.cuda.is_bf16_supported()}")
PY
[ "${PIPESTATUS[0]}" = 0 ] || exit 1

families="${POSBIAS_GPU_FAMILIES:-$("$PY" -c 'from pytest_posbias.models.tiny import FAMILIES; print(" ".join(FAMILIES))')}"
"$PY" - "$work/ckpt" $families <<'PY' || exit 1
import sys

from pytest_posbias.models.tiny import build_tiny_checkpoint

for family in sys.argv[2:]:
    build_tiny_checkpoint(family, f"{sys.argv[1]}/{family}")
    print(f"built the tiny {family} checkpoint")
PY

mkdir -p "$work/project"
(cd "$work/project" && "${posbias[@]}" init --quick >"$OUT/init.log" 2>&1) || { cat "$OUT/init.log"; exit 1; }

status=0
for family in $families; do
  # one positional configuration and the option-order gate: a prompt of four videos and one of
  # several-choice questions, generated and scored through the GPU
  (cd "$work/project" && timeout "${POSBIAS_GPU_RUN_TIMEOUT:-1800}" "$PY" -m pytest "${plugin[@]}" -p no:cacheprovider -p no:randomly \
      -m "(meg or option_order) and not slow" -k "domestic-short or order" --posbias-fixed \
      --posbias-model="$work/ckpt/$family" --posbias-device "$DEVICE" --posbias-judge fragment \
      --posbias-json="$OUT/$family.json" >"$OUT/$family.log" 2>&1)
  rc=$?
  cp "$work"/project/.posbias/runs/*/run.jsonl "$OUT/$family.run.jsonl" 2>/dev/null
  rm -rf "$work"/project/.posbias/runs
  "$PY" - "$family" "$rc" "$OUT" "$DEVICE" <<'PY' || status=1
import json
import sys
from pathlib import Path

family, rc, out, device = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
want = ("cuda", "bfloat16") if device.startswith("cuda") else (device.split(":")[0], "float32")
log = out / f"{family}.run.jsonl"
records = [json.loads(x) for x in log.read_text().splitlines()] if log.is_file() else []
models = [r for r in records if r.get("kind") == "model"]
summary = json.loads((out / f"{family}.json").read_text()) if (out / f"{family}.json").is_file() else {}
calls = summary.get("calls", {})
decided = "RUN DECISION" in (out / f"{family}.log").read_text()
ok = rc in (0, 1, 6) and decided and bool(models) and calls.get("made", 0) > 0
for m in models:
    ident, place = m.get("identity", {}), m.get("placement", {})
    ok = ok and (ident.get("device_type"), ident.get("dtype")) == want
    print(f"{family}: exit {rc}; {ident.get('dtype')} on {place.get('device')} ({ident.get('attn_implementation')}); "
          f"{calls.get('made', 0)} calls, {calls.get('failed', 0)} failed, {calls.get('prompt_tokens', 0)} prompt "
          f"({calls.get('visual_tokens', 0)} visual) and {calls.get('output_tokens', 0)} output tokens")
if not models:
    print(f"{family}: exit {rc}; no model record in the run log (see {family}.log)")
print(f"{family}: {'ok' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
done

# batched against one at a time on the GPU, greedy and sampled, and whether they give the same
# tokens, on the checkpoints built above
bench=()
for family in $families; do bench+=(--model "$work/ckpt/$family"); done
"$PY" "$ROOT/benchmarks/hf_backend.py" --device "$DEVICE" "${bench[@]}" 2>&1 | tee "$OUT/hf_backend.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit "$status"
