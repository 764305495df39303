"""The ONNX -> offline model converter behind ``openacl convert`` (ATC's role).

``convert_onnx`` runs the pipeline (ONNX import with the given input shapes, graph passes,
lowering to aclnn steps, the static memory plan), writes the .om file (``om.py``) and
returns a ``ConversionReport``: op counts before and after, weights, arena and activation
memory, time. ``format_report`` prints it the way the CLI shows it.

Models have static input shapes, or a set of batch sizes (``--dynamic-batch``, one compiled
gear each), in fp32, fp16 or mixed precision (``--precision``, ``model/precision.py``).
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_PARSE_MODEL, AclError
from openacl.model import om, onnx_import
from openacl.model.lowering import lower
from openacl.model.onnx_graph import upgrade_opset
from openacl.model.onnx_import import import_onnx
from openacl.model.passes import fold_onnx, optimize
from openacl.model.plan import plan_memory
from openacl.model.precision import apply_precision, check_precision

MB = 1 << 20  # bytes in a MB as the report shows them (MiB, as ATC and npu-smi do)


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
    dynamic_batch: list[int] = field(default_factory=list)  # the gears' batch sizes
    precision: str = "fp32"


def _counts(names: Any) -> dict[str, int]:
    return dict(collections.Counter(names).most_common())


def compile_onnx(model: Any, input_shapes: dict[str, tuple[int, ...]] | None = None,
                 precision: str = "fp32"):
    """The whole conversion pipeline in memory: fold constants on the ONNX model (so shape
    inference reaches every value), import, optimize, lower, plan. Returns
    ``(graph, lowered, plan)``; shared by ``convert_onnx`` and ``InferenceSession``."""
    shapes = {name: tuple(shape) for name, shape in (input_shapes or {}).items()}
    proto, _ = upgrade_opset(onnx_import._load(model))
    graph = import_onnx(fold_onnx(proto, shapes), shapes)
    lowered = lower(apply_precision(optimize(graph), precision))
    return graph, lowered, plan_memory(lowered)


def _batch_sizes(dynamic_batch: Sequence[int]) -> list[int]:
    sizes = [int(b) if isinstance(b, (int, np.integer)) and not isinstance(b, bool) else -1
             for b in dynamic_batch]
    if not sizes or len(sizes) > om.MAX_GEARS or min(sizes) < 1 or \
            len(set(sizes)) != len(sizes):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'dynamic_batch' = {list(dynamic_batch)!r} is invalid: give 1 "
                       f"to {om.MAX_GEARS} distinct batch sizes >= 1")
    return sorted(sizes)


def _gear_shapes(proto: Any, input_shapes: dict[str, tuple[int, ...]] | None,
                 batch: int) -> dict[str, tuple[int, ...]]:
    """Every graph input's shape with ``batch`` as dim 0 (ATC's --dynamic_batch_size: the
    batch is each input's first dim; the other dims come from ``input_shapes`` or the
    model, where -1 or a named dim is what varies)."""
    initializers = {t.name for t in proto.graph.initializer}
    shapes = {}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        given = (input_shapes or {}).get(value.name)
        dims = list(given) if given is not None else [
            d.dim_value if d.HasField("dim_value") else -1
            for d in value.type.tensor_type.shape.dim]
        if not dims:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"input {value.name!r} is a scalar: a dynamic batch needs dim 0")
        if any(d < 0 for d in dims[1:]):
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"input {value.name!r} has dims {dims}: only dim 0 (the batch) may "
                           f"vary; give the others with input_shapes / --input-shape")
        shapes[value.name] = (batch, *dims[1:])
    return shapes


def convert_onnx(source: str | os.PathLike, output: str | os.PathLike,
                 input_shapes: dict[str, tuple[int, ...]] | None = None,
                 dynamic_batch: Sequence[int] | None = None,
                 precision: str = "fp32") -> ConversionReport:
    """Convert the ONNX model at ``source`` into the offline model ``output``.

    With ``dynamic_batch`` (ATC's --dynamic_batch_size) the model is converted once per
    batch size, dim 0 of every input; the file holds each gear's graph and plan and the
    weights once, and ``acl.mdl.set_dynamic_batch_size`` / ``InferenceSession`` choose.
    ``precision`` is ``fp32``, ``fp16`` or ``mixed`` (see ``model/precision.py``).

    Raises:
        AclError: ACL_ERROR_INVALID_FILE / PARSE_MODEL / OP_NOT_FOUND for a model the converter
            cannot read or lower (the message names the node, op and attribute);
            ACL_ERROR_INVALID_PARAM for bad batch sizes; ACL_ERROR_WRITE_FILE when ``output``
            cannot be written.
    """
    import onnx

    started = time.perf_counter()
    source, output = os.fspath(source), os.fspath(output)
    proto = onnx_import._load(source)  # the importer's reader, with its error codes
    onnx_ops = _counts(node.op_type for node in proto.graph.node)
    check_precision(precision)
    gears, batches = [], []
    if dynamic_batch is not None:
        batches = _batch_sizes(dynamic_batch)
        for batch in batches[:-1]:
            _, gear_lowered, gear_plan = compile_onnx(
                source, _gear_shapes(proto, input_shapes, batch), precision)
            gears.append(om.Gear(batch, gear_lowered, gear_plan))
        input_shapes = _gear_shapes(proto, input_shapes, batches[-1])  # the main model
    elif any(d < 0 for shape in (input_shapes or {}).values() for d in shape):
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"input shapes {input_shapes} hold -1: give --dynamic-batch sizes")
    graph, lowered, plan = compile_onnx(proto, input_shapes, precision)
    shapes = {name: list(graph.values[name].shape) for name in graph.inputs}
    metadata = {"converter": f"openacl {_version()}", "format_version":
                f"{om.VERSION_MAJOR}.{om.VERSION_MINOR}", "source_model":
                os.path.basename(source), "precision": precision, "input_shapes": shapes,
                "onnx_opset": graph.opset, "onnx_ir_version": int(proto.ir_version),
                "onnx_producer": proto.producer_name, "onnx_package": onnx.__version__}
    if batches:
        metadata["dynamic_batch"] = batches
    file_bytes = om.save_model(lowered, plan, output, metadata, gears)
    used = om.referenced_weights(lowered, plan)
    return ConversionReport(
        source=source, output=output, onnx_ops=onnx_ops,
        aclnn_ops=_counts(step.op for step in lowered.steps),
        weights_bytes=sum(graph.initializers[name].nbytes for name in used),
        weights_count=len(used), arena_bytes=plan.arena_bytes, naive_bytes=plan.naive_bytes,
        file_bytes=file_bytes, input_shapes=shapes, seconds=time.perf_counter() - started,
        dynamic_batch=batches, precision=precision)


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
        f"  input shapes: {shapes or 'none'}   precision: {report.precision}",
        *([f"  dynamic batch: {report.dynamic_batch} (one gear each; the shapes and memory "
           f"below are the largest's)"] if report.dynamic_batch else []),
        f"  ONNX nodes: {sum(report.onnx_ops.values())} ({_ops_line(report.onnx_ops)})",
        f"  aclnn steps: {sum(report.aclnn_ops.values())} ({_ops_line(report.aclnn_ops)})",
        f"  weights: {_mb(report.weights_bytes)} in {report.weights_count} tensor(s)",
        f"  arena: {_mb(report.arena_bytes)}",
        f"  activation memory {_mb(report.naive_bytes)} -> {_mb(report.arena_bytes)}",
        f"  file: {_mb(report.file_bytes)}",
    ])
