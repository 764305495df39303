"""ONNX's backend node tests run through the converter and the engine.

Each case of ``onnx.backend.test.loader.load_model_tests(kind="node")`` (one ONNX op, its
inputs and expected outputs) is converted and run by ``InferenceSession`` on the cpu
backend and compared with ONNX's expected outputs at the case's own tolerances
(``np.testing.assert_allclose(rtol, atol)``, as ONNX's runner does; NaN where NaN is
expected). A case ends as:

* ``passed``;
* ``unsupported``: the converter refuses the op or one of its attributes/inputs with its
  clear "is not supported" error (what the issue asks of an unsupported op);
* ``failed``: it ran and an output is wrong, or another error was raised.

``python tests/onnx_node_cases.py [--markdown PATH]`` prints the tally by op (the README's
table). ``test_onnx_node.py`` asserts that every case of a supported op passes except the
documented ``EXCEPTIONS``.
"""

from __future__ import annotations

import collections
import contextlib
import io
import re
import sys
import warnings
from dataclasses import dataclass

import numpy as np

UNSUPPORTED = re.compile(r"not supported|only tensors are supported")


@dataclass
class Outcome:
    name: str
    op: str
    status: str  # passed, unsupported, failed
    detail: str = ""


def load_cases() -> list:
    from onnx.backend.test import loader

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return loader.load_model_tests(kind="node")


def op_of(case) -> str:
    """The op a node case tests: its graph's last node (the test's subject)."""
    return case.model.graph.node[-1].op_type if case.model.graph.node else "?"


def _arrays(values: list) -> list:
    """The case's values as numpy arrays (some cases keep TensorProtos)."""
    from onnx import TensorProto, numpy_helper

    return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else v for v in values]


def run_case(case) -> Outcome:
    import openacl
    from openacl.errors import AclError

    op = op_of(case)
    inputs, expected = (_arrays(values) for values in case.data_sets[0])
    names = [value.name for value in case.model.graph.input]
    feeds = dict(zip(names, inputs, strict=False))
    shapes = {name: value.shape for name, value in feeds.items() if hasattr(value, "shape")}
    try:
        session = openacl.InferenceSession(case.model, shapes)
    except AclError as exc:
        status = "unsupported" if UNSUPPORTED.search(exc.message) else "failed"
        return Outcome(case.name, op, status, f"convert: {exc.message}")
    except Exception as exc:  # noqa: BLE001 - a converter crash is a failure to report
        return Outcome(case.name, op, "failed", f"convert crashed: {type(exc).__name__}: {exc}")
    try:
        outputs = session.run(None, {k: np.asarray(v) for k, v in feeds.items()})
    except Exception as exc:  # noqa: BLE001
        return Outcome(case.name, op, "failed", f"run: {type(exc).__name__}: {exc}")
    finally:
        session.close()
    for index, (ours, theirs) in enumerate(zip(outputs, expected, strict=False)):
        theirs = np.asarray(theirs)
        if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
            return Outcome(case.name, op, "failed",
                           f"output {index}: {ours.dtype}{list(ours.shape)} != expected "
                           f"{theirs.dtype}{list(theirs.shape)}")
        try:
            if theirs.dtype.kind in "biu":
                np.testing.assert_array_equal(ours, theirs)
            elif theirs.dtype.kind in "fc":
                np.testing.assert_allclose(ours, theirs, rtol=case.rtol, atol=case.atol)
            else:  # ml_dtypes' floats (bfloat16): compare their values in float32
                np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32),
                                           rtol=case.rtol, atol=case.atol)
        except AssertionError as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()][:4]
            return Outcome(case.name, op, "failed", f"output {index}: " + " ".join(lines))
    return Outcome(case.name, op, "passed")


def run_all(cases=None) -> list[Outcome]:
    import openacl

    cases = load_cases() if cases is None else cases
    started = openacl.is_initialized()
    if not started:
        openacl.init({"stream_mode": "inline"})
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [run_case(case) for case in cases]
    finally:
        if not started:
            openacl.finalize()


def markdown(outcomes: list[Outcome]) -> str:
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for outcome in outcomes:
        by_op[outcome.op][outcome.status] += 1
    supported = {op: c for op, c in by_op.items() if c["passed"] or c["failed"]}
    total = collections.Counter()
    for counts in by_op.values():
        total.update(counts)
    failures = f"{total['failed']} fail" + (" (`python tests/onnx_node_cases.py` lists "
                                             "them)" if total["failed"] else "")
    lines = [f"{total['passed']} of {len(outcomes)} node cases pass; {total['unsupported']} "
             f"are refused as unsupported (op, attribute or input); {failures}. By op, for "
             f"the {len(supported)} ops with a case that converts:", "",
             "| op | passed | unsupported | failed |", "|---|---|---|---|"]
    for op in sorted(supported):
        counts = supported[op]
        lines.append(f"| {op} | {counts['passed']} | {counts['unsupported']} | "
                     f"{counts['failed']} |")
    refused = sorted(op for op in by_op if op not in supported)
    lines += ["", f"Ops refused in every case ({len(refused)}): " + ", ".join(refused) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    outcomes = run_all()
    text = markdown(outcomes)
    print(text)
    for outcome in outcomes:
        if outcome.status == "failed":
            print(f"FAILED {outcome.name} ({outcome.op}): {outcome.detail[:300]}")
    if "--markdown" in argv:
        with open(argv[argv.index("--markdown") + 1], "w", encoding="utf-8") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
