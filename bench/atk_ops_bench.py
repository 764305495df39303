"""Phase-1 cost and kernel speed of issue 20's operators against torch CPU, at ATK shapes.

Issue 20's measure: no new operator slower than 2x torch's CPU kernel at the ATK's typical
shapes. The new operators are those registered now that were not at commit 645c402.

Per operator, one case of its fetched ATK suite (``tools/atk.py fetch``): among the cases
this machine runs whose tensors are float32 (else any dtype), up to ``MAX_BYTES`` of input,
the median-size one, its inputs made by ``tests/atk_driver.py`` as the ATK run makes them.
Timed, interleaved, median of repeats:

(a) phase 1 alone (``GetWorkspaceSize``: validation, binding, the executor; destroyed),
(b) ours: phase 1 + phase 2 on a stream + ``synchronize`` (outputs preallocated),
(c) torch: the operator's ATK golden (tests/atk_goldens, torch calls) on float32 torch
    tensors, ``torch.set_num_threads`` matching our threads. A golden that widens to float64
    or loops on the host flatters us; random operators (a ``check=`` golden) have no peer.

Ratio = ours / torch; ``>2x`` is flagged.

Run: ``.venv/bin/python bench/atk_ops_bench.py [--ops A,B] [--quick] [--markdown FILE]``.
"""

from __future__ import annotations

import os
import sys

FORCED_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(name in os.environ for name in FORCED_BLAS):  # measure what a user's machine runs
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in FORCED_BLAS})

import argparse  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tools"), str(ROOT / "src")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import US_PER_S, blas_kernels, print_table, ratio, time_interleaved  # noqa: E402

BASE_COMMIT = "645c402"  # issue 20's operators: registered now, not at this commit
MAX_BYTES = 16 << 20  # largest case input taken, bytes (keeps a full run near 5 minutes)
TARGET_RATIO = 2.0  # issue 20: ours within this factor of torch
BATCH_SECONDS = 2e-3  # a timed batch lasts about this long (calls per batch fitted)
REPEATS, QUICK_REPEATS = 5, 2


def new_ops() -> list[str]:
    """Operators registered now that no family module registered at ``BASE_COMMIT``."""
    from openacl.ops import REGISTRY

    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", BASE_COMMIT,
                              "src/openacl/ops/"], capture_output=True, text=True, check=True)
    old: set[str] = set()
    for path in listing.stdout.split():
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{BASE_COMMIT}:{path}"],
                              capture_output=True, text=True, check=True).stdout
        old.update(part.split('"', 1)[0] for part in text.split('@register("')[1:])
    return sorted(set(REGISTRY) - old)


def _float32_only(case: Any) -> bool:
    dtypes = [str(item.get("dtype", "")).lower() for entry in case.data["inputs"]
              for item in (entry if isinstance(entry, list) else [entry])
              if isinstance(item, dict) and item.get("type") in ("tensor", "tensors")]
    return bool(dtypes) and all(d in ("float32", "fp32", "float") for d in dtypes if
                                d.startswith(("f", "b")))


def pick_case(cases: list[Any]) -> Any | None:
    """The median-size case up to ``MAX_BYTES`` (float32 ones first)."""
    import atk_driver

    fitting = [c for c in cases if atk_driver.input_bytes(c) <= MAX_BYTES]
    preferred = [c for c in fitting if _float32_only(c)] or fitting
    preferred.sort(key=atk_driver.input_bytes)
    return preferred[len(preferred) // 2] if preferred else None


def _shape(inputs: list[Any]) -> str:
    """The first tensor's shape and dtype (a tensor list's first, with its length)."""
    for value in inputs:
        items = value if isinstance(value, list) else [value]
        if items and isinstance(items[0], np.ndarray):
            text = f"{'x'.join(map(str, items[0].shape)) or 'scalar'} {items[0].dtype}"
            return text + (f" list[{len(items)}]" if isinstance(value, list) else "")
    return "-"


def _calls(fn: Any) -> int:
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(1000, int(BATCH_SECONDS / once)))


def bench_op(name: str, case: Any, goldens: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Time one operator's case (see the module docstring)."""
    import atk_driver
    import openacl
    from openacl import aclnn
    from openacl.dtypes import from_numpy_dtype
    from openacl.ops import REGISTRY
    from openacl.ops.dispatch import phase1, phase2
    from openacl.ops.oneshot import _allocate
    from openacl.tensor import create_scalar

    op, entry = REGISTRY[name], goldens[name]
    inputs = atk_driver.make_inputs(case)
    if entry.skip is not None and entry.skip(inputs):
        raise atk_driver.NotRun(entry.skip(inputs))
    names = entry.params or tuple(p.name for p in op.inputs)
    inputs = atk_driver._fit_attributes(case, op, names, inputs)
    if entry.prepare is not None:
        inputs = entry.prepare(inputs)
    written = {p.name for p in op.outputs} - {p.name for p in op.inputs}
    typed = [atk_driver._typed_scalar(v, d) for v, d in
             zip(inputs, atk_driver.scalar_dtypes(case) + [None] * len(inputs), strict=False)]
    kinds = {p.name: p.kind for p in op.params}
    raw: dict[str, Any] = {}
    for arg, value in zip(names, typed, strict=False):
        if arg in written or arg.startswith(atk_driver.GOLDEN_ONLY):
            continue
        value = atk_driver._device(value)
        if kinds.get(arg) == "scalar" and isinstance(value, (int, float, bool, np.generic)):
            value = create_scalar(value, from_numpy_dtype(np.asarray(value).dtype))
        raw[arg] = value
    for param in op.params:
        if param.name not in raw and not param.output:
            raw[param.name] = param.default
    call, _ = op.bind(dict(raw), infer=True)
    outputs = [p.name for p in op.outputs if p.name not in {a for _, a in op.aliases}]
    raw.update({n: _allocate(call.inferred[n]) for n in outputs if n in call.inferred})
    stream = openacl.Stream()

    def phase_one() -> None:
        _, executor = phase1(op, raw)
        aclnn.destroy_executor(executor)

    def ours() -> None:
        size, executor = phase1(op, raw)
        workspace = openacl.rt.malloc(size) if size else 0
        phase2(op, workspace, size, executor, stream)
        stream.synchronize()
        if workspace:
            openacl.rt.free(workspace)

    cases = {"phase 1": phase_one, "ours": ours}
    if entry.check is None:
        narrow = [atk_driver._to_torch(v, working=True) for v in inputs]
        dtypes = atk_driver._dtypes_of(inputs)

        def peer() -> None:
            entry.fn(dtypes, *narrow) if entry.with_dtypes else entry.fn(*narrow)

        peer()
        cases["torch"] = peer
    ours()
    calls = min(_calls(fn) for fn in cases.values())
    times = time_interleaved(cases, repeats, warmup=1, calls=calls)
    torch_us = times.get("torch", float("nan")) * US_PER_S
    ours_us = times["ours"] * US_PER_S
    return {"op": name, "shape": _shape(inputs), "phase1_us": times["phase 1"] * US_PER_S,
            "ours_us": ours_us, "torch_us": torch_us,
            "ratio": ratio(ours_us, torch_us) if "torch" in times else float("nan")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", help="comma-separated operators (default: every new one)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table here")
    args = parser.parse_args(argv)

    import atk

    import atk_driver
    import openacl
    from openacl.runtime import threads

    goldens = atk_driver.load_goldens()
    chosen = args.ops.split(",") if args.ops else new_ops()
    by_op: dict[str, list[Any]] = {}
    for case in atk.fetched_cases():
        by_op.setdefault(case.op, []).append(case)
    openacl.init({})
    openacl.rt.set_device(0)
    torch.set_num_threads(threads.configured())
    print(f"load average {os.getloadavg()}; numpy BLAS: {blas_kernels()}; "
          f"threads: ours {threads.configured()}, torch {torch.get_num_threads()}")
    rows, missing = [], []
    repeats = QUICK_REPEATS if args.quick else REPEATS
    for name in chosen:
        case = pick_case(by_op.get(name, []))
        if case is None or name not in goldens:
            missing.append(f"{name} (no ATK case or golden)")
            continue
        try:
            with np.errstate(all="ignore"):
                rows.append(bench_op(name, case, goldens, repeats))
        except Exception as exc:  # noqa: BLE001 - one operator's failure is reported, not fatal
            missing.append(f"{name} ({type(exc).__name__}: {str(exc)[:80]})")
    headers = ("operator", "shape", "phase-1 us", "ours us", "torch us", "ratio", "")
    table = [(r["op"], r["shape"], r["phase1_us"], r["ours_us"], r["torch_us"], r["ratio"],
              ">2x" if r["ratio"] > TARGET_RATIO else "") for r in rows]
    print_table("issue 20 operators, ATK median shapes (ours = phase 1 + phase 2 + sync)",
                headers, table)
    slow = [r["op"] for r in rows if r["ratio"] > TARGET_RATIO]
    print(f"\n{len(rows)} timed, {len(slow)} over {TARGET_RATIO}x torch: {', '.join(slow)}")
    if missing:
        print(f"not timed ({len(missing)}): " + "; ".join(missing))
    print(f"load average {os.getloadavg()}")
    if args.markdown:
        lines = ["| " + " | ".join(headers[:-1]) + " |", "|" + "---|" * (len(headers) - 1)]
        lines += [f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.2f}"
                  f"{' **>2x**' if r[6] else ''} |" for r in table]
        Path(args.markdown).write_text("\n".join(lines) + "\n", encoding="utf-8")
    openacl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
