#!/usr/bin/env bash
# Data-parallel inference and a tensor-parallel MLP on 2 ranks over HCCL (openacl launch).
# Runs from any directory; uses $PYTHON, else the repository's .venv, else python3.
# Ends with "test pass" (exit 0) or "test failed" (exit 1).
CURRENT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$CURRENT_DIR/../.." && pwd)
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO_DIR/.venv/bin/python" ]; then PYTHON="$REPO_DIR/.venv/bin/python"
    else PYTHON=python3; fi
fi
RANKS=2
TIMEOUT_S=50  # every rank is killed past this

fail() {
    echo "[ERROR] $1"
    echo "hccl_data_parallel: test failed"
    exit 1
}

cd "$CURRENT_DIR" || fail "cannot enter $CURRENT_DIR"
rm -rf output
mkdir -p output

"$PYTHON" -m openacl.cli.main launch -n "$RANKS" --timeout "$TIMEOUT_S" main.py \
    || fail "a rank failed"
echo "hccl_data_parallel: test pass"
