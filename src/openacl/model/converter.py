"""The ONNX -> offline model converter behind ``openacl convert`` (ATC's role).

``convert_onnx`` runs the pipeline (ONNX import with the given input shapes, graph passes,
lowering to aclnn steps, the static memory plan), writes the .om file (``om.py``) and
returns a ``ConversionReport``: op counts before and after, weights, arena and activation
memory, time. ``format_report`` prints it the way the CLI shows it.

Only fp32 models with static input shapes are produced: ``--precision fp16|mixed`` and
``--dynamic-batch`` are not available yet (the CLI refuses them by name).
"""

from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from typing import Any

from openacl.model import om, onnx_import
from openacl.model.lowering import lower
from openacl.model.onnx_import import import_onnx
from openacl.model.passes import fold_onnx, optimize
from openacl.model.plan import plan_memory

MB = 1 << 20  # bytes in a MB as the report shows them (MiB, as ATC and npu-smi do)
PRECISION = "fp32"  # the only precision mode the converter produces so far


@dataclass
class ConversionReport:
    """What a conversion did."""

    source: str
    output: str
    onnx_ops: dict[str, int] = field(default_factory=dict)  # ONNX op type -> nodes
    aclnn_ops: dict[str, int] = field(default_factory=dict)  # aclnn operator -> steps
    weights_bytes: int = 0
    weights_count: int = 0
    arena_bytes: int = 0
    naive_bytes: int = 0  # activation memory without the plan (every value its own buffer)
    file_bytes: int = 0
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0


def _counts(names: Any) -> dict[str, int]:
    return dict(collections.Counter(names).most_common())


def compile_onnx(model: Any, input_shapes: dict[str, tuple[int, ...]] | None = None):
    """The whole conversion pipeline in memory: fold constants on the ONNX model (so shape
    inference reaches every value), import, optimize, lower, plan. Returns
    ``(graph, lowered, plan)``; shared by ``convert_onnx`` and ``InferenceSession``."""
    shapes = {name: tuple(shape) for name, shape in (input_shapes or {}).items()}
    graph = import_onnx(fold_onnx(model, shapes), shapes)
    lowered = lower(optimize(graph))
    return graph, lowered, plan_memory(lowered)


def convert_onnx(source: str | os.PathLike, output: str | os.PathLike,
                 input_shapes: dict[str, tuple[int, ...]] | None = None) -> ConversionReport:
    """Convert the ONNX model at ``source`` into the offline model ``output``.

    Raises:
        AclError: ACL_ERROR_INVALID_FILE / PARSE_MODEL / OP_NOT_FOUND for a model the converter
            cannot read or lower (the message names the node, op and attribute);
            ACL_ERROR_WRITE_FILE when ``output`` cannot be written.
    """
    import onnx

    started = time.perf_counter()
    source, output = os.fspath(source), os.fspath(output)
    proto = onnx_import._load(source)  # the importer's reader, with its error codes
    onnx_ops = _counts(node.op_type for node in proto.graph.node)
    graph, lowered, plan = compile_onnx(proto, input_shapes)
    shapes = {name: list(graph.values[name].shape) for name in graph.inputs}
    metadata = {"converter": f"openacl {_version()}", "format_version":
                f"{om.VERSION_MAJOR}.{om.VERSION_MINOR}", "source_model":
                os.path.basename(source), "precision": PRECISION, "input_shapes": shapes,
                "onnx_opset": graph.opset, "onnx_ir_version": int(proto.ir_version),
                "onnx_producer": proto.producer_name, "onnx_package": onnx.__version__}
    file_bytes = om.save_model(lowered, plan, output, metadata)
    used = om.referenced_weights(lowered, plan)
    return ConversionReport(
        source=source, output=output, onnx_ops=onnx_ops,
        aclnn_ops=_counts(step.op for step in lowered.steps),
        weights_bytes=sum(graph.initializers[name].nbytes for name in used),
        weights_count=len(used), arena_bytes=plan.arena_bytes, naive_bytes=plan.naive_bytes,
        file_bytes=file_bytes, input_shapes=shapes, seconds=time.perf_counter() - started)


def _version() -> str:
    from openacl import __version__

    return __version__


def _mb(nbytes: int) -> str:
    return f"{nbytes / MB:.2f} MB" if nbytes >= MB else f"{nbytes / MB:.3f} MB"


def _ops_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def format_report(report: ConversionReport) -> str:
    """The converter's report, as ``openacl convert`` prints it."""
    shapes = "; ".join(f"{name}:{','.join(map(str, shape))}"
                       for name, shape in report.input_shapes.items())
    return "\n".join([
        f"converted {report.source} -> {report.output} in {report.seconds:.2f} s",
        f"  input shapes: {shapes or 'none'}   precision: {PRECISION} (fp16/mixed and dynamic "
        f"batch: not available yet)",
        f"  ONNX nodes: {sum(report.onnx_ops.values())} ({_ops_line(report.onnx_ops)})",
        f"  aclnn steps: {sum(report.aclnn_ops.values())} ({_ops_line(report.aclnn_ops)})",
        f"  weights: {_mb(report.weights_bytes)} in {report.weights_count} tensor(s)",
        f"  arena: {_mb(report.arena_bytes)}",
        f"  activation memory {_mb(report.naive_bytes)} -> {_mb(report.arena_bytes)}",
        f"  file: {_mb(report.file_bytes)}",
    ])
