"""The ONNX -> offline model converter behind ``openacl convert`` (ATC's role).

``convert_onnx`` runs the pipeline (ONNX import with the given input shapes, graph passes,
lowering to aclnn steps, the static memory plan), writes the .om file (``om.py``) and
returns a ``ConversionReport``: op counts before and after, weights, arena and activation
memory, time. ``format_report`` prints it the way the CLI shows it.

Models have static input shapes, or a set of batch sizes (``--dynamic-batch``, one compiled
gear each), in fp32, fp16 or mixed precision (``--precision``, ``model/precision.py``).
``out_nodes`` (ATC's --out_nodes) chooses the outputs; ``options`` (the command line's
conversion options, ATC's names) are recorded in the file's metadata; ``progress`` is told
the name of each phase as it starts (the CLI's progress bar and ``--log=info``).
"""

from __future__ import annotations

import collections
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_OP_NOT_FOUND,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model import om, onnx_import
from openacl.model.lowering import lower
from openacl.model.onnx_graph import default_opset, select_outputs, upgrade_opset
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
    shape_ranges: dict[str, str] = field(default_factory=dict)  # a dynamic-shape model's
    small_constants: int = 0  # elements of the small constants kept in its graph
    gears: list[list[int]] = field(default_factory=list)  # --dynamic-dims/-image-size values
    source_opset: int = 0  # the model's default-domain opset as written
    opset: int = 0  # the opset it was converted at (older ones are upgraded to 11)
    options: dict[str, Any] = field(default_factory=dict)  # recorded conversion options
    outputs: list[str] = field(default_factory=list)  # the graph outputs (--out_nodes)


def _counts(names: Any) -> dict[str, int]:
    return dict(collections.Counter(names).most_common())


Progress = Callable[[str], None]  # told each conversion phase's name as it starts


def _no_progress(phase: str) -> None:
    """The default ``progress``: phases go unreported."""


def compile_onnx(model: Any, input_shapes: dict[str, tuple[int, ...]] | None = None,
                 precision: str = "fp32", progress: Progress | None = None,
                 label: str = ""):
    """The whole conversion pipeline in memory: fold constants on the ONNX model (so shape
    inference reaches every value), import, optimize, lower, plan. Returns
    ``(graph, lowered, plan)``; shared by ``convert_onnx`` and ``InferenceSession``.
    ``progress`` hears each phase's name (after ``label``, such as a gear's batch)."""
    report = progress or _no_progress
    shapes = {name: tuple(shape) for name, shape in (input_shapes or {}).items()}
    proto, _ = upgrade_opset(onnx_import._load(model))
    report(f"{label}fold constants")
    folded = fold_onnx(proto, shapes)
    report(f"{label}import")
    graph = import_onnx(folded, shapes)
    report(f"{label}optimize")
    optimized = apply_precision(optimize(graph), precision)
    report(f"{label}lower to aclnn")
    lowered = lower(optimized)
    report(f"{label}plan memory")
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
    shapes, varying = {}, []
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        given = (input_shapes or {}).get(value.name)
        declared = [d.dim_value if d.HasField("dim_value") else d.dim_param or -1
                    for d in value.type.tensor_type.shape.dim]
        dims = list(given) if given is not None else [
            d if isinstance(d, int) else -1 for d in declared]
        if not dims:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"input {value.name!r} is a scalar: a dynamic batch needs dim 0")
        if any(not isinstance(d, int) or d < 0 for d in dims[1:]):
            varying.append((value.name, list(given) if given is not None else declared))
        shapes[value.name] = (batch, *dims[1:])
    if varying:
        listed = ", ".join(f"{name} (rank {len(dims)}: {','.join(map(str, dims))})"
                           for name, dims in varying)
        example = ";".join(f"{name}:-1," + ",".join(
            str(d) if isinstance(d, int) and d >= 0 else "N" for d in dims[1:])
            for name, dims in varying)
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"only dim 0 (the batch) may vary with a dynamic batch; these inputs "
                       f"have other dims that are not fixed: {listed}; give them with "
                       f"input_shapes / --input-shape \"{example}\" (N: the size)")
    return shapes


def convert_onnx(source: str | os.PathLike, output: str | os.PathLike,
                 input_shapes: dict[str, tuple[int, ...]] | None = None,
                 dynamic_batch: Sequence[int] | None = None,
                 precision: str = "fp32",
                 dynamic_dims: Sequence[Sequence[int]] | None = None,
                 dynamic_image_size: Sequence[Sequence[int]] | None = None,
                 out_nodes: Sequence[str] | None = None,
                 options: Mapping[str, Any] | None = None,
                 progress: Progress | None = None) -> ConversionReport:
    """Convert the ONNX model at ``source`` into the offline model ``output``.

    With ``dynamic_batch`` (ATC's --dynamic_batch_size) the model is converted once per
    batch size, dim 0 of every input; the file holds each gear's graph and plan and the
    weights once, and ``acl.mdl.set_dynamic_batch_size`` / ``InferenceSession`` choose.
    ``precision`` is ``fp32``, ``fp16`` or ``mixed`` (see ``model/precision.py``).
    ``input_shapes`` may hold shape ranges (a (low, high) pair, or -1 for any size; ATC's
    ``1~8`` / ``-1``): the file is then a dynamic-shape model (format 2.x) specialised at
    run time, as is a model whose inputs keep dynamic dims. ``dynamic_dims`` (ATC's
    --dynamic_dims: one list of values per gear for the -1 dims of ``input_shapes``, in
    order) and ``dynamic_image_size`` (--dynamic_image_size: (height, width) per gear for
    each input's two -1 dims) restrict such a model to those gears. ``out_nodes`` (ATC's
    --out_nodes: ``node_name:index`` or value names) replaces the graph's outputs
    (``onnx_graph.select_outputs``). ``options`` (JSON-able, the conversion options as the
    user gave them) go into the file's metadata as ``options``; ``progress`` hears each
    phase's name.

    Raises:
        AclError: ACL_ERROR_INVALID_FILE / PARSE_MODEL / OP_NOT_FOUND for a model the converter
            cannot read or lower (the message names the node, op and attribute);
            ACL_ERROR_INVALID_PARAM for bad batch sizes; ACL_ERROR_WRITE_FILE when ``output``
            cannot be written.
    """
    started = time.perf_counter()
    report = progress or _no_progress
    onnx = onnx_import.require_onnx()
    source, output = os.fspath(source), os.fspath(output)
    report("read model")
    proto = onnx_import._load(source)  # the importer's reader, with its error codes
    if out_nodes is not None:
        select_outputs(proto, out_nodes)
    onnx_ops = _counts(node.op_type for node in proto.graph.node)
    check_precision(precision)
    recorded = dict(options or {})
    gears, batches = [], []
    chosen = [name for name, value in (("dynamic_batch", dynamic_batch), ("dynamic_dims",
              dynamic_dims), ("dynamic_image_size", dynamic_image_size)) if value is not None]
    if len(chosen) > 1:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"arguments {' and '.join(repr(c) for c in chosen)} are mutually "
                       f"exclusive (as ATC's options are)")
    if dynamic_dims is not None or dynamic_image_size is not None:
        ranges, gear_set = gear_shapes(proto, input_shapes, dynamic_dims, dynamic_image_size)
        return _convert_staged(proto, source, output, ranges, precision, onnx_ops, started,
                               gear_set, recorded, report)
    if dynamic_batch is not None:
        batches = _batch_sizes(dynamic_batch)
        for batch in batches[:-1]:
            _, gear_lowered, gear_plan = compile_onnx(
                proto, _gear_shapes(proto, input_shapes, batch), precision, report,
                f"batch {batch}: ")
            gears.append(om.Gear(batch, gear_lowered, gear_plan))
        input_shapes = _gear_shapes(proto, input_shapes, batches[-1])  # the main model
    else:
        ranges = shape_ranges(proto, input_shapes)
        if ranges is not None:  # ATC's shape ranges, or dims the model leaves dynamic
            return _convert_staged(proto, source, output, ranges, precision, onnx_ops, started,
                                   None, recorded, report)
        try:
            compiled = compile_onnx(proto, input_shapes, precision, report)
        except AclError as exc:
            if exc.code != ACL_ERROR_OP_NOT_FOUND:
                raise
            # an op only the host runs (Loop, NonZero, ...): the staged engine takes it
            ranges = {name: [(d, d) for d in shape] for name, shape in
                      _fixed_shapes(proto, input_shapes).items()}
            return _convert_staged(proto, source, output, ranges, precision, onnx_ops,
                                   started, None, recorded, report)
    if dynamic_batch is not None:
        compiled = compile_onnx(proto, input_shapes, precision, report,
                                f"batch {batches[-1]}: ")
    graph, lowered, plan = compiled
    shapes = {name: list(graph.values[name].shape) for name in graph.inputs}
    metadata = {"converter": f"openacl {_version()}", "format_version":
                f"{om.VERSION_MAJOR}.{om.VERSION_MINOR}", "source_model":
                os.path.basename(source), "precision": precision, "input_shapes": shapes,
                "onnx_opset": graph.opset, "onnx_ir_version": int(proto.ir_version),
                "onnx_producer": proto.producer_name, "onnx_package": onnx.__version__}
    if batches:
        metadata["dynamic_batch"] = batches
    if recorded:
        metadata["options"] = recorded
    report("write .om")
    file_bytes = om.save_model(lowered, plan, output, metadata, gears)
    used = om.referenced_weights(lowered, plan)
    return ConversionReport(
        source=source, output=output, onnx_ops=onnx_ops,
        aclnn_ops=_counts(step.op for step in lowered.steps),
        weights_bytes=sum(graph.initializers[name].nbytes for name in used),
        weights_count=len(used), arena_bytes=plan.arena_bytes, naive_bytes=plan.naive_bytes,
        file_bytes=file_bytes, input_shapes=shapes, seconds=time.perf_counter() - started,
        dynamic_batch=batches, precision=precision,
        source_opset=default_opset(proto), opset=graph.opset, options=recorded,
        outputs=list(graph.outputs))


Dim = Any  # an int (-1: any size), or a (low, high) range with high -1 for no limit


def _declared(proto: Any) -> dict[str, list[Any]]:
    """Each graph input's declared dims (ints; None where dynamic or -1)."""
    initializers = {t.name for t in proto.graph.initializer}
    dims = {}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        shape = value.type.tensor_type.shape
        dims[value.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                            else None for d in shape.dim]
    return dims


def shape_ranges(proto: Any, input_shapes: dict[str, Sequence[Dim]] | None
                 ) -> dict[str, list[tuple[int, int]]] | None:
    """The (low, high) ranges of every input when any input dim is not fixed: given as -1 or
    a (low, high) pair in ``input_shapes`` (ATC's ``1~8`` / ``-1``), or left dynamic by the
    model and not given; None when every dim is fixed (a static conversion).

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM for a name that is not an input, a rank that is
            not the input's, or a dim that is neither an int >= -1 nor a range.
    """
    declared = _declared(proto)
    given = dict(input_shapes or {})
    unknown = [name for name in given if name not in declared]
    if unknown:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'input_shapes' names {unknown}, which are not graph inputs "
                       f"(the inputs are {', '.join(declared) or 'none'})")
    ranges, dynamic = {}, False
    for name, dims in declared.items():
        shape = list(given.get(name, dims))
        if name in given and len(shape) != len(dims) and dims:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'input_shapes' gives input {name!r} {len(shape)} dims; "
                           f"the model's has {len(dims)}")
        pairs = []
        for dim in shape:
            pair = _range(name, dim)
            dynamic = dynamic or pair[0] != pair[1]
            pairs.append(pair)
        ranges[name] = pairs
    return ranges if dynamic else None


def _range(name: str, dim: Any) -> tuple[int, int]:
    from openacl.model.om_staged import UNBOUNDED

    if dim is None or (_is_int(dim) and dim == -1):
        return 1, UNBOUNDED  # ATC's -1: any size (GE's default range [1, -1])
    if _is_int(dim) and dim >= 0:
        return int(dim), int(dim)
    if isinstance(dim, (tuple, list)) and len(dim) == 2 and all(_is_int(d) for d in dim):
        low, high = int(dim[0]), int(dim[1])
        if 0 <= low and (high == UNBOUNDED or high >= low):
            return low, high
    raise AclError(ACL_ERROR_INVALID_PARAM,
                   f"argument 'input_shapes' gives input {name!r} the dim {dim!r}: give an int "
                   f">= 0, -1 (any size) or a (low, high) range (high -1: no limit)")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _fixed_shapes(proto: Any, input_shapes: dict[str, Sequence[int]] | None
                  ) -> dict[str, list[int]]:
    given = dict(input_shapes or {})
    return {name: list(given.get(name, dims)) for name, dims in _declared(proto).items()}


def gear_shapes(proto: Any, input_shapes: dict[str, Sequence[Dim]] | None,
                dynamic_dims: Sequence[Sequence[int]] | None,
                dynamic_image_size: Sequence[Sequence[int]] | None) -> tuple[dict, Any]:
    """(ranges, Gears) of ATC's --dynamic_dims / --dynamic_image_size over the -1 dims of
    ``input_shapes`` (or of the model's declaration where it names no input).

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM for gears of the wrong length, repeated or
            negative values, too many gears, or inputs without the -1 dims they need.
    """
    from openacl.model.om_staged import MAX_GEARS, Gears

    declared = _declared(proto)
    given = dict(input_shapes or {})
    kind = "dims" if dynamic_dims is not None else "image_size"
    argument = "dynamic_dims" if kind == "dims" else "dynamic_image_size"
    gears = [tuple(gear) for gear in (dynamic_dims if kind == "dims" else dynamic_image_size)]
    bases, positions = {}, []
    for name, dims in declared.items():
        shape = list(given.get(name, dims))
        for index, dim in enumerate(shape):
            if dim is None or (_is_int(dim) and dim == -1):
                positions.append((name, index))
            elif not _is_int(dim) or dim < 0:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument 'input_shapes' gives input {name!r} the dim {dim!r}: "
                               f"with {argument} a dim is an int >= 0 or -1")
        bases[name] = shape
    width = len(positions) if kind == "dims" else 2
    if kind == "image_size":
        per_input = collections.Counter(name for name, _ in positions)
        odd = [name for name, count in per_input.items() if count != 2]
        if odd or not per_input:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'dynamic_image_size' needs each image input to have two "
                           f"-1 dims (height, width); {odd or 'no input'} do not")
    if not 1 <= len(gears) <= MAX_GEARS or len(set(gears)) != len(gears) or any(
            len(gear) != width or not all(_is_int(v) and v >= 0 for v in gear)
            for gear in gears):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument {argument!r} = {[list(g) for g in gears]} is invalid: give 1 "
                       f"to {MAX_GEARS} distinct gears of {width} ints >= 0 each (one per -1 "
                       f"dim of the input shapes {positions})")
    shapes = []
    for gear in gears:
        filled = {name: list(shape) for name, shape in bases.items()}
        for number, (name, index) in enumerate(positions):
            filled[name][index] = int(gear[number if kind == "dims" else number % 2])
        shapes.append({name: tuple(shape) for name, shape in filled.items()})
    ranges = {name: [(min(s[name][d] for s in shapes), max(s[name][d] for s in shapes))
                     for d in range(len(bases[name]))] for name in bases}
    return ranges, Gears(kind, tuple(positions), tuple(shapes))


def _convert_staged(proto: Any, source: str, output: str,
                    ranges: dict[str, list[tuple[int, int]]], precision: str,
                    onnx_ops: dict[str, int], started: float, gears: Any = None,
                    options: dict[str, Any] | None = None, report: Progress = _no_progress
                    ) -> ConversionReport:
    """Write a dynamic-shape offline model (format 2.x, ``om_staged.py``): the ONNX graph,
    its weights once, the inputs' ranges; the engine specialises it per input shape."""
    onnx = onnx_import.require_onnx()
    from openacl.model.om_staged import format_ranges, staged_chunks
    from openacl.model.staged import StagedModel

    report("check the graph (dynamic shapes)")
    model = StagedModel(proto, precision=precision, ranges=ranges, gears=gears)  # checks it
    shown = {name: format_ranges(pairs) for name, pairs in ranges.items()}
    metadata = {"converter": f"openacl {_version()}", "format_version":
                f"{om.STAGED_MAJOR}.{om.STAGED_MINOR}", "source_model":
                os.path.basename(source), "precision": precision, "shape_ranges": shown,
                "onnx_opset": model.source_opset, "onnx_ir_version": int(proto.ir_version),
                "onnx_producer": proto.producer_name, "onnx_package": onnx.__version__}
    if gears is not None:
        metadata["dynamic_" + gears.kind] = [list(gears.values(shape)) for shape in gears.shapes]
    if options:
        metadata["options"] = dict(options)
    report("write .om")
    light = model.light_proto()
    file_bytes = om.write_chunks(staged_chunks(light, model.weights, ranges, precision,
                                               metadata, gears), output)
    small = sum(math.prod(t.dims) for t in light.graph.initializer)
    model.close()
    return ConversionReport(
        source=source, output=output, onnx_ops=onnx_ops, aclnn_ops={},
        weights_bytes=sum(a.nbytes for a in model.weights.values()),
        weights_count=len(model.weights), file_bytes=file_bytes,
        input_shapes={name: [] for name in ranges}, seconds=time.perf_counter() - started,
        precision=precision, shape_ranges=shown, small_constants=small,
        source_opset=model.source_opset, opset=default_opset(light),
        gears=[] if gears is None else [list(gears.values(shape)) for shape in gears.shapes],
        options=dict(options or {}), outputs=[v.name for v in light.graph.output])


def _version() -> str:
    from openacl import __version__

    return __version__


def _mb(nbytes: int) -> str:
    return f"{nbytes / MB:.2f} MB" if nbytes >= MB else f"{nbytes / MB:.3f} MB"


def _ops_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def _opset_line(report: ConversionReport) -> list[str]:
    """The report's line on an upgraded opset (none when the model's was kept)."""
    if report.source_opset and report.opset and report.source_opset != report.opset:
        return [f"  ONNX opset {report.source_opset} upgraded to {report.opset} by "
                f"onnx.version_converter"]
    return []


RECORDED_ONLY = ("soc_version", "input_format")  # options kept in the file, with no effect


def _options_lines(report: ConversionReport) -> list[str]:
    """The report's lines on chosen outputs and on options recorded without an effect."""
    lines = []
    if "out_nodes" in report.options:
        lines.append(f"  outputs (--out_nodes): {', '.join(report.outputs)}")
    recorded = [f"{name} {report.options[name]}" for name in RECORDED_ONLY
                if name in report.options]
    if recorded:
        lines.append(f"  recorded in the model, no effect on the CPU: {', '.join(recorded)}")
    return lines


def format_report(report: ConversionReport) -> str:
    """The converter's report, as ``openacl convert`` prints it."""
    if report.shape_ranges:
        ranges = "; ".join(f"{name}:{dims}" for name, dims in report.shape_ranges.items())
        return "\n".join([
            f"converted {report.source} -> {report.output} in {report.seconds:.2f} s",
            f"  shape ranges: {ranges}   precision: {report.precision}",
            *([f"  gears (values of the -1 dims): {report.gears}"] if report.gears else []),
            "  dynamic shapes: the model is kept as a graph and specialised at run time, once "
            "per input shape (format 2.x)",
            *_opset_line(report),
            *_options_lines(report),
            f"  ONNX nodes: {sum(report.onnx_ops.values())} ({_ops_line(report.onnx_ops)})",
            f"  weights: {_mb(report.weights_bytes)} in {report.weights_count} tensor(s)",
            f"  file: {_mb(report.file_bytes)}",
        ])
    shapes = "; ".join(f"{name}:{','.join(map(str, shape))}"
                       for name, shape in report.input_shapes.items())
    return "\n".join([
        f"converted {report.source} -> {report.output} in {report.seconds:.2f} s",
        f"  input shapes: {shapes or 'none'}   precision: {report.precision}",
        *([f"  dynamic batch: {report.dynamic_batch} (one gear each; the shapes and memory "
           f"below are the largest's)"] if report.dynamic_batch else []),
        *_opset_line(report),
        *_options_lines(report),
        f"  ONNX nodes: {sum(report.onnx_ops.values())} ({_ops_line(report.onnx_ops)})",
        f"  aclnn steps: {sum(report.aclnn_ops.values())} ({_ops_line(report.aclnn_ops)})",
        f"  weights: {_mb(report.weights_bytes)} in {report.weights_count} tensor(s)",
        f"  arena: {_mb(report.arena_bytes)}",
        f"  activation memory {_mb(report.naive_bytes)} -> {_mb(report.arena_bytes)}",
        f"  file: {_mb(report.file_bytes)}",
    ])
