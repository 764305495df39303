"""ONNX's backend node tests run through the converter and the engine.

Each case of ``onnx.backend.test.loader.load_model_tests(kind="node")`` (one ONNX op, its
inputs and expected outputs) is converted and run by ``InferenceSession`` on the cpu
backend and compared with ONNX's expected outputs at the case's own tolerances
(``np.testing.assert_allclose(rtol, atol)``, as ONNX's runner does; NaN where NaN is
expected). A case ends as:

* ``passed``;
* ``unsupported``: the converter refuses the op or one of its attributes/inputs with its
  clear "is not supported" error (what the issue asks of an unsupported op);
* ``known``: set aside for the reason ``KNOWN_DIFFERENCES`` states (random ops, float16
  rounding, CANN's own operator rules): its outputs are not compared;
* ``failed``: it ran and an output is wrong, or another error was raised.

``python tests/onnx_node_cases.py [--markdown PATH]`` prints the tally by op (the table of
docs/onnx-conformance.md). ``test_onnx_node.py`` asserts that every case of a supported op
passes except the documented ``EXCEPTIONS``.
"""

from __future__ import annotations

import collections
import contextlib
import io
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

UNSUPPORTED = re.compile(r"not supported|only tensors are supported")
# cases that run and differ from ONNX's expected outputs for a stated reason (by name prefix)
KNOWN_DIFFERENCES = {
    "test_bernoulli": "random: the expected outputs come from another generator",
    "test_image_decoder": "the host's ImageDecoder needs Pillow, which only some environments "
                          "have (the bench extra's matplotlib brings it): set apart so the table "
                          "is the same with and without it",
    "test_attention_4d_causal_bf16_expanded": "float16/bfloat16 computed in float32 and "
                                              "rounded once, the reference rounds each step",
    "test_attention_4d_causal_fp16_expanded": "float16/bfloat16 computed in float32 and "
                                              "rounded once, the reference rounds each step",
    "test_attention_4d_attn_mask_causal_bf16_expanded": "float16/bfloat16 computed in float32 "
                                                        "and rounded once",
    "test_attention_3d_causal_bf16_expanded": "float16/bfloat16 computed in float32 and "
                                              "rounded once",
    "test_attention_4d_padded_kv_bf16_expanded": "bfloat16 computed in float32 and rounded "
                                                 "once, the reference rounds each step",
    "test_attention_4d_causal_padded_kv_bf16_expanded": "bfloat16 computed in float32 and "
                                                        "rounded once",
    "test_reduce_log_sum_exp_empty_set": "aclnnAmax/Amin refuse an empty reduction (CANN's "
                                         "rule); ONNX wants the identity (-inf/inf)",
    "test_reduce_max_empty_set": "aclnnAmax refuses an empty reduction (CANN's rule)",
    "test_reduce_min_empty_set": "aclnnAmin refuses an empty reduction (CANN's rule)",
    "test_scan_sum": "an opset-8 Scan (batch axis) that onnx.version_converter upgrades with "
                     "inputs of another rank than the case feeds",
}


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


def _difference(ours: Any, theirs: Any, case: Any) -> str | None:
    """What differs between our output and the expected one (None: they agree); a sequence
    (list) element by element, strings exactly."""
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            return f"{type(ours).__name__} of {len(ours) if hasattr(ours, '__len__') else '?'}" \
                   f" != expected a sequence of {len(theirs)}"
        for position, (mine, expected) in enumerate(zip(ours, theirs, strict=True)):
            problem = _difference(mine, expected, case)
            if problem is not None:
                return f"[{position}] {problem}"
        return None
    theirs = np.asarray(theirs)
    strings = isinstance(ours, np.ndarray) and ours.dtype == object and \
        theirs.dtype.kind in "OUS"  # ours hold str objects, as onnxruntime's do
    if not isinstance(ours, np.ndarray) or ours.shape != theirs.shape or (
            ours.dtype != theirs.dtype and not strings):
        shown = f"{ours.dtype}{list(ours.shape)}" if isinstance(ours, np.ndarray) else \
            type(ours).__name__
        return f"{shown} != expected {theirs.dtype}{list(theirs.shape)}"
    try:
        if theirs.dtype.kind in "biuOUS":
            np.testing.assert_array_equal(ours, theirs)
        elif theirs.dtype.kind in "fc":
            np.testing.assert_allclose(ours, theirs, rtol=case.rtol, atol=case.atol)
        else:  # ml_dtypes' floats (bfloat16): compare their values in float32
            np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32),
                                       rtol=case.rtol, atol=case.atol)
    except AssertionError as exc:
        return " ".join([line for line in str(exc).splitlines() if line.strip()][:4])
    return None


def run_case(case) -> Outcome:
    import openacl
    from openacl.errors import AclError

    op = op_of(case)
    inputs, expected = (_arrays(values) for values in case.data_sets[0])
    names = [value.name for value in case.model.graph.input]
    feeds = dict(zip(names, inputs, strict=False))
    shapes = {name: value.shape for name, value in feeds.items() if hasattr(value, "shape")}
    known = next((reason for prefix, reason in KNOWN_DIFFERENCES.items()
                  if case.name.startswith(prefix)), None)
    try:
        session = openacl.InferenceSession(case.model, shapes)
    except AclError as exc:  # a case set aside stays aside, whatever refuses it
        status = "known" if known else (
            "unsupported" if UNSUPPORTED.search(exc.message) else "failed")
        return Outcome(case.name, op, status, f"convert: {exc.message}")
    except Exception as exc:  # noqa: BLE001 - a converter crash is a failure to report
        return Outcome(case.name, op, "failed", f"convert crashed: {type(exc).__name__}: {exc}")
    try:
        outputs = session.run(None, {k: np.asarray(v) for k, v in feeds.items()})
    except AclError as exc:  # a dynamic model is specialised, and may refuse, at its run
        status = "known" if known else (
            "unsupported" if UNSUPPORTED.search(exc.message) else "failed")
        return Outcome(case.name, op, status, f"run: {exc.message}" + (
            f" ({known})" if status == "known" else ""))
    except Exception as exc:  # noqa: BLE001
        return Outcome(case.name, op, "failed", f"run: {type(exc).__name__}: {exc}")
    finally:
        session.close()
    if known:  # set aside whatever the comparison says (a random case may match by chance)
        return Outcome(case.name, op, "known", known)
    host = sorted(getattr(session.staged, "host_ops", ()) or ())
    passed = Outcome(case.name, op, "passed", "host: " + ", ".join(host) if host else "")
    for index, (ours, theirs) in enumerate(zip(outputs, expected, strict=False)):
        problem = _difference(ours, theirs, case)
        if problem is not None:
            return Outcome(case.name, op, "known" if known else "failed",
                           f"output {index}: {problem}" + (f" ({known})" if known else ""))
    return passed


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
    supported = {op: c for op, c in by_op.items() if c["passed"] or c["failed"] or c["known"]}
    total = collections.Counter()
    for counts in by_op.values():
        total.update(counts)
    failures = f"{total['failed']} fail" + (" (`python tests/onnx_node_cases.py` lists "
                                             "them)" if total["failed"] else "")
    on_host = sum(1 for o in outcomes if o.status == "passed" and o.detail.startswith("host"))
    lines = [f"{total['passed']} of {len(outcomes)} node cases pass ({on_host} of them with an "
             f"op that has no aclnn lowering run by the host reference evaluator); "
             f"{total['unsupported']} are refused as unsupported (op, attribute or input); "
             f"{total['known']} are set aside for a known reason (below); {failures}. By op, for "
             f"the {len(supported)} ops with a case that runs:", "",
             "| op | passed | unsupported | known | failed |", "|---|---|---|---|---|"]
    for op in sorted(supported):
        counts = supported[op]
        lines.append(f"| {op} | {counts['passed']} | {counts['unsupported']} | "
                     f"{counts['known']} | {counts['failed']} |")
    refused = sorted(op for op in by_op if op not in supported)
    lines += ["", f"Ops refused in every case ({len(refused)}): " + ", ".join(refused) + "."]
    lines += ["", "Known differences:"] + [f"- `{prefix}*`: {reason}"
                                           for prefix, reason in KNOWN_DIFFERENCES.items()]
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
