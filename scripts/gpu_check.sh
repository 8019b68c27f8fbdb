#!/usr/bin/env bash
# The GPU checks of issue 17 on one GPU machine, in under 10 minutes:
#   1. a virtualenv of its own with torch 2.13.0 (the project's pin) as a CUDA build;
#   2. python -m lab.servecap.gpu_check: the engine bench on cuda in bf16 (tokens/s and the
#      memory bandwidth achieved against the GPU's datasheet figure), the NVML sampler for 30 s,
#      and a short static-vs-continuous sweep with --device cuda. It prints a summary last.
#
#   scripts/gpu_check.sh                       # from the repository root, on the GPU machine
#   scripts/gpu_check.sh --dry-run             # what it would install and run; changes nothing
#   GPU_CHECK_PYTHON=.venv/bin/python scripts/gpu_check.sh --device cpu --quick   # the CPU test
#
# Where torch 2.13.0 comes from, first that works:
#   TORCH_WHEELS=DIR   a folder holding torch-2.13.0+cuXXX and its nvidia-* wheels (no network);
#   the PyTorch index  TORCH_INDEX_URL (default https://download.pytorch.org/whl/cu130; needs network);
#   else the machine's own torch (the venv sees the base interpreter's packages), and the
#   summary says which torch ran. A CUDA torch wheel is ~1 GB: it cannot travel in a 64 MiB
#   working tree, so on a machine without network expect the fallback, named in the output.
# The sweep also needs fastapi, uvicorn, pydantic and locust: WHEELS=DIR installs every wheel in
# DIR without network (make it elsewhere with `pip download --only-binary=:all: --python-version
# 3.12 --platform manylinux2014_x86_64 -d DIR fastapi uvicorn locust ...`); without them the sweep
# step is skipped and says so.
# Other settings: VENV (default /tmp/servecap-gpu-venv), BASE_PYTHON (default python3),
# GPU_CHECK_PYTHON (use this interpreter as is: no venv, no installs), OUT (default $OUT or
# ./gpu_check_out). Arguments go to lab.servecap.gpu_check (--device, --quick, --budget-s, ...).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-/tmp/servecap-gpu-venv}"
BASE_PYTHON="${BASE_PYTHON:-python3}"
TORCH_VERSION="2.13.0"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu130}"
RESULTS="${OUT:-$PWD/gpu_check_out}"
DRY_RUN=0
for arg in "$@"; do [[ "$arg" == "--dry-run" ]] && DRY_RUN=1; done

say() { echo "gpu_check: $*" >&2; }
run() { if (( DRY_RUN )); then echo "would run: $*"; else "$@"; fi; }

install_torch() {   # into $VENV: from TORCH_WHEELS, else the index; returns 1 when neither works
  local pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 10 --retries 0)
  if [[ -n "${TORCH_WHEELS:-}" ]]; then
    run "${pip[@]}" --no-index --find-links "$TORCH_WHEELS" "torch==$TORCH_VERSION" && return 0
    say "torch $TORCH_VERSION is not installable from TORCH_WHEELS=$TORCH_WHEELS"
  fi
  run "${pip[@]}" --index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION" && return 0
  say "torch $TORCH_VERSION could not be installed from $TORCH_INDEX_URL (no network here?)"
  return 1
}

if [[ -n "${GPU_CHECK_PYTHON:-}" ]]; then
  PYTHON="$GPU_CHECK_PYTHON"
  say "using $PYTHON as it is (GPU_CHECK_PYTHON): no venv, no installs"
else
  PYTHON="$VENV/bin/python"
  if [[ ! -x "$PYTHON" ]] || (( DRY_RUN )); then
    run "$BASE_PYTHON" -m venv --system-site-packages "$VENV"
    # BASE_PYTHON may itself be a venv's (the GPU image's is): a venv made from it sees the
    # interpreter's own packages, not that venv's, so point at its site-packages explicitly.
    # They come after this venv's own, so a torch installed here wins over the base one.
    if (( ! DRY_RUN )); then
      site_dir="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
      "$BASE_PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' > "$site_dir/servecap_base_site.pth"
    fi
  fi
  if ! install_torch; then
    say "falling back to the machine's own torch: $("$BASE_PYTHON" -c 'import torch; print(torch.__version__)' 2>&1 || true)"
  fi
  if [[ -n "${WHEELS:-}" ]]; then
    run "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$WHEELS"/*.whl
  fi
  if (( DRY_RUN )); then PYTHON="$BASE_PYTHON"; fi   # the plan below prints without the venv
fi

cd "$REPO"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$PYTHON" -m lab.servecap.gpu_check --out "$RESULTS" "$@"
