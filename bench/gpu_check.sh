#!/usr/bin/env bash
# The GPU check of the CUDA backend, in one run on a machine with an NVIDIA GPU, CuPy,
# PyTorch and pytest already installed and no network (it installs nothing). It runs
# $PYTHON if set, else the project's .venv/bin/python (as the examples do), else python3.
#
#   bash bench/gpu_check.sh [RESULTS_DIR]      # default: $OUT, else bench/results
#
# 1. the test suites on the CUDA backend (every test parametrized over backends, cuda ids);
# 2. bench/gpu_bench.py (elementwise bandwidth, matmul, host copies, MiniLM vs torch).
# Writes tests.log, tests.xml, bench.log, gpu.json (and a dated copy, gpu-YYYY-MM-DD.json,
# the file to commit as bench/results/) and nvidia-smi.txt to RESULTS_DIR.
# MiniLM: ../shared/models/all-MiniLM-L6-v2.seq128.onnx, else the packed copy in .gpu/
# (bench/gpu_model_carry.py) unpacked to /tmp.
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS="${1:-${OUT:-bench/results}}"
TEST_SECONDS="${GPU_CHECK_TEST_SECONDS:-200}"
BENCH_SECONDS="${GPU_CHECK_BENCH_SECONDS:-200}"
mkdir -p "$RESULTS"
export PYTHONPATH="$PWD/src:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# the interpreter: $PYTHON, else the project's .venv (as the examples' run.sh), else python3
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3; fi
echo "python: $PY"

nvidia-smi > "$RESULTS/nvidia-smi.txt" 2>&1 || true
"$PY" -c "import cupy, numpy, torch; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)"

MINILM=""
if [ -f ../shared/models/all-MiniLM-L6-v2.seq128.onnx ]; then
  MINILM=../shared/models/all-MiniLM-L6-v2.seq128.onnx
elif [ -f .gpu/minilm.f16.onnx ]; then
  "$PY" bench/gpu_model_carry.py unpack .gpu/minilm.f16.onnx /tmp/minilm.onnx && MINILM=/tmp/minilm.onnx
fi

PARALLEL=""
"$PY" -c "import xdist" 2>/dev/null && PARALLEL="-n ${GPU_CHECK_WORKERS:-8}"
echo "== tests on the CUDA backend (limit ${TEST_SECONDS}s) ${PARALLEL}"
OPENACL_TEST_BACKENDS=cuda timeout "$TEST_SECONDS" "$PY" -m pytest -p no:cacheprovider -q \
  $PARALLEL -k cuda --timeout 30 -rfE --tb=short --junitxml="$RESULTS/tests.xml" tests \
  > "$RESULTS/tests.log" 2>&1
echo "pytest exit: $?"
tail -n 5 "$RESULTS/tests.log"

echo "== benchmarks (limit ${BENCH_SECONDS}s)"
timeout "$BENCH_SECONDS" "$PY" bench/gpu_bench.py --json "$RESULTS/gpu.json" \
  ${MINILM:+--minilm "$MINILM"} ${GPU_BENCH_SKIP:+--skip "$GPU_BENCH_SKIP"} 2>&1 | tee "$RESULTS/bench.log" | tail -n 40
echo "bench exit: ${PIPESTATUS[0]}"
# the file to commit (bench/results/gpu-<date>.json, quoted in the README)
[ -f "$RESULTS/gpu.json" ] && cp "$RESULTS/gpu.json" "$RESULTS/gpu-$(date -u +%F).json"
