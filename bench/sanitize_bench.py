"""The sanitizer's cost: every ``examples/*/`` application and a pyACL-style script, each run
without and with the sanitizer (every tool and the leak check), side by side.

Each workload is a fresh process (what ``openacl sanitize -- ...`` costs a user), timed
interleaved off / on, the order alternating, median of ``REPEATS``; plus an in-process loop
of kernel launches, aclnn launches and async copies that shows the cost per call without
the interpreter's start-up. Ratio = on / off; the target is <= ``TARGET_RATIO``.
Run: ``.venv/bin/python bench/sanitize_bench.py [--json PATH]``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import parse_args

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
REPEATS = 3  # process runs per side
TARGET_RATIO = 10.0  # the sanitizer may slow a program down by at most this much
SANITIZE = "memcheck,racecheck,initcheck,synccheck,leak-check"
LOOP_ITERATIONS = 200  # iterations of the in-process loop
RUN_TIMEOUT_S = 300

PYACL_APP = textwrap.dedent("""
    import numpy as np
    import acl

    ITERATIONS = 200
    NBYTES = 1 << 16
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    host = np.arange(NBYTES // 4, dtype=np.float32)
    out = np.empty_like(host)
    host_ptr, out_ptr = acl.util.numpy_to_ptr(host), acl.util.numpy_to_ptr(out)
    dev, _ = acl.rt.malloc(NBYTES, 0)
    dev2, _ = acl.rt.malloc(NBYTES, 0)
    for _ in range(ITERATIONS):
        acl.rt.memcpy_async(dev, NBYTES, host_ptr, NBYTES, 1, stream)
        acl.rt.memcpy_async(dev2, NBYTES, dev, NBYTES, 3, stream)
        acl.rt.memcpy_async(out_ptr, NBYTES, dev2, NBYTES, 2, stream)
        acl.rt.synchronize_stream(stream)
    assert np.array_equal(out, host)
    acl.rt.free(dev)
    acl.rt.free(dev2)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
""")

LOOP_APP = textwrap.dedent(f"""
    import sys, time
    import numpy as np
    import openacl
    from openacl import aclnn, rt
    from openacl.custom import get_block_idx, get_block_num, global_buffer, kernel

    @kernel
    def add(x, y, z, n):
        per = n // get_block_num()
        start = get_block_idx() * per
        xs, ys, zs = (global_buffer(p, np.float32, per, offset=start) for p in (x, y, z))
        np.add(xs, ys, out=zs)

    n = 1 << 14
    openacl.init()
    rt.set_device(0)
    stream = rt.create_stream()
    a = openacl.to_device(np.ones(n, np.float32))
    b = openacl.to_device(np.ones(n, np.float32))
    c = openacl.empty((n,), np.float32)
    host = rt.malloc_host(n * 4)
    began = time.perf_counter()
    for _ in range({LOOP_ITERATIONS}):
        add[8, stream](a.data_ptr, b.data_ptr, c.data_ptr, n)
        size, executor = aclnn.add_get_workspace_size(c, a, None, b)
        aclnn.add(0, size, executor, stream)
        rt.memcpy_async(host, n * 4, b.data_ptr, n * 4, 2, stream)
        rt.synchronize_stream(stream)
    print(time.perf_counter() - began)
    rt.free_host(host)
    for t in (a, b, c):
        t.free()
    openacl.finalize()
""")


def _environ(sanitized: bool) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("OPENACL_SANITIZE")}
    environ["PYTHON"] = sys.executable
    if sanitized:
        environ["OPENACL_SANITIZE"] = SANITIZE
    return environ


def _run(command: list[str], cwd: Path, sanitized: bool) -> tuple[float, str]:
    began = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=_environ(sanitized), capture_output=True,
                            text=True, timeout=RUN_TIMEOUT_S)
    elapsed = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    if sanitized and "====== " in result.stderr:
        raise RuntimeError(f"{' '.join(command)}: the sanitizer reported findings in a "
                           f"correct program:\n{result.stderr}")
    return elapsed, result.stdout


def _workloads(scratch: Path) -> list[tuple[str, list[str], Path]]:
    """(name, command, folder): each example's application (its inputs made once), the
    pyACL script, the in-process loop."""
    found = []
    # the AclNNInvocation-shaped examples (gen_data, then one application process); the
    # HCCL example starts several ranks through openacl launch and is not one of them
    for gen_data in sorted(EXAMPLES.glob("*/scripts/gen_data.py")):
        source = gen_data.parents[1]
        folder = scratch / source.name
        shutil.copytree(source, folder, ignore=shutil.ignore_patterns("input", "output"))
        (folder / "input").mkdir()
        (folder / "output").mkdir()
        subprocess.run([sys.executable, "scripts/gen_data.py"], cwd=folder, check=True,
                       capture_output=True, timeout=RUN_TIMEOUT_S)
        main = "src/main.py" if (folder / "src" / "main.py").exists() else "main.py"
        found.append((f"examples/{source.name}", [sys.executable, main], folder))
    (scratch / "pyacl_app.py").write_text(PYACL_APP)
    found.append(("pyACL script (python -m openacl.compat)",
                  [sys.executable, "-m", "openacl.compat", "pyacl_app.py"], scratch))
    (scratch / "loop.py").write_text(LOOP_APP)
    found.append((f"in-process loop x{LOOP_ITERATIONS} (kernel+aclnn+memcpy)",
                  [sys.executable, "loop.py"], scratch))
    return found


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    rows = []
    with tempfile.TemporaryDirectory(prefix="sanitize-bench-") as directory:
        for name, command, cwd in _workloads(Path(directory)):
            times: dict[bool, list[float]] = {False: [], True: []}
            for repeat in range(REPEATS):
                for sanitized in ((False, True) if repeat % 2 == 0 else (True, False)):
                    elapsed, stdout = _run(command, cwd, sanitized)
                    if name.startswith("in-process"):  # the loop's own time, no start-up
                        elapsed = float(stdout.strip().splitlines()[-1])
                    times[sanitized].append(elapsed)
            off, on = statistics.median(times[False]), statistics.median(times[True])
            rows.append({"workload": name, "off_s": off, "on_s": on, "ratio": on / off})
    print(f"{'workload':<52} {'off s':>8} {'on s':>8} {'ratio':>7}  target <= {TARGET_RATIO:g}x")
    for row in rows:
        verdict = "PASS" if row["ratio"] <= TARGET_RATIO else "FAIL"
        print(f"{row['workload']:<52} {row['off_s']:>8.3f} {row['on_s']:>8.3f} "
              f"{row['ratio']:>6.2f}x  {verdict}")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"sanitize": SANITIZE, "repeats": REPEATS, "rows": rows}, handle,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
