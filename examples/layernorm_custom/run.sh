#!/usr/bin/env bash
# LayerNormCustom, aclnn: clean, generate data, run, verify.
# Runs from any directory; uses $PYTHON, else the repository's .venv, else python3.
# Ends with "test pass" (exit 0) or "test failed" (exit 1).
CURRENT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$CURRENT_DIR/../.." && pwd)
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO_DIR/.venv/bin/python" ]; then PYTHON="$REPO_DIR/.venv/bin/python"
    else PYTHON=python3; fi
fi

fail() {
    echo "[ERROR] $1"
    echo "layernorm_custom: test failed"
    exit 1
}

cd "$CURRENT_DIR" || fail "cannot enter $CURRENT_DIR"

# 1. clean what an earlier run left
rm -rf input output
mkdir -p input output

# 2. inputs and golden
"$PYTHON" scripts/gen_data.py || fail "generate input data failed"
echo "[INFO]  generate input data success"

# 3. run the application (loads op/, runs aclnnLayerNormCustom)
"$PYTHON" main.py || fail "application run failed"
echo "[INFO]  application run success"

# 4. compare with the golden
"$PYTHON" scripts/verify_result.py output/output_y.bin output/golden.bin --dtype float32 --standard mixed \
    || fail "verify result failed"
echo "layernorm_custom: test pass"
