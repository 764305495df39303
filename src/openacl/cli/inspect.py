"""``openacl inspect``: what a model file (.om or .onnx) holds, as text or JSON.

Examples::

    openacl inspect model.om            # inputs, outputs, gears, ops, memory, options
    openacl inspect model.onnx --json   # the same as JSON (atc --mode=1's role)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from openacl.cli.convert import STATUS_BAD_INPUT

__all__ = ["format_description", "register"]

MB = 1 << 20  # bytes in a MB as inspect shows them (MiB, as ATC and npu-smi do)
OPS_SHOWN = 12  # op types the text lists before "..."


def _mb(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / MB:.3f} MB ({nbytes} bytes)"


def _dims(item: dict[str, Any]) -> str:
    dims = item.get("dims")
    if dims is None:
        return "?"  # rank unknown
    return "[" + ",".join(str(d) for d in dims) + "]"


def _ranges(item: dict[str, Any]) -> str:
    pairs = item.get("ranges")
    if not pairs or all(low == high for low, high in pairs):
        return ""
    shown = ",".join(str(low) if low == high else f"{low}~{high}" for low, high in pairs)
    return f"  range {shown}"


def format_description(description: dict[str, Any]) -> str:
    """``model.describe``'s dict as ``openacl inspect`` prints it."""
    lines = [f"{description['file']}: {description['kind']}"
             + (f" format {description['format_version']}"
                if "format_version" in description else "")
             + f", {description['model_type']}, {description['file_bytes']} bytes"]
    if description.get("precision"):
        lines.append(f"  precision: {description['precision']}")
    for kind in ("inputs", "outputs"):
        lines.append(f"  {kind}:")
        for item in description[kind]:
            lines.append(f"    {item['name']}: {item['dtype']} {_dims(item)}{_ranges(item)}")
    gears = description.get("gears")
    if gears:
        values = "; ".join(",".join(map(str, gear)) for gear in gears["values"])
        lines.append(f"  gears ({gears['kind']}): {values}")
    for family, counts in description["op_counts"].items():
        listed = ", ".join(f"{op} {n}" for op, n in list(counts.items())[:OPS_SHOWN])
        more = ", ..." if len(counts) > OPS_SHOWN else ""
        lines.append(f"  {family} ops: {sum(counts.values())} ({listed or 'none'}{more})")
    lines.append(f"  weights: {_mb(description['weights_bytes'])} in "
                 f"{description['weights_count']} tensor(s)")
    if description.get("arena_bytes") is not None:
        lines.append(f"  arena: {_mb(description['arena_bytes'])} (activations without the "
                     f"plan: {_mb(description['naive_bytes'])})")
    elif description["kind"] == "offline model":
        lines.append("  arena: planned per input shape at run time")
    lines.append(f"  opset: {description['opset']}"
                 + (f"   producer: {description['producer']}"
                    if description.get("producer") else ""))
    options = description.get("options") or {}
    if options:
        lines.append("  conversion options: " + ", ".join(
            f"{name}={value}" for name, value in options.items()))
    converter = (description.get("metadata") or {}).get("converter")
    if converter:
        lines.append(f"  converted by: {converter}")
    return "\n".join(lines)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from openacl.errors import AclError
    from openacl.model.describe import describe_model

    try:
        description = describe_model(args.model)
    except AclError as exc:
        print(f"openacl inspect: {exc}", file=sys.stderr)
        return STATUS_BAD_INPUT
    print(json.dumps(description, indent=2) if args.json else format_description(description))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``inspect`` to the ``openacl`` command's subcommands."""
    inspect = commands.add_parser(
        "inspect", help="what a model (.om or .onnx) holds: inputs, outputs, gears, ops, "
                        "memory, conversion options",
        description="Describe a model file without running it: an offline model (.om) or "
                    "an ONNX model (.onnx, read as it is, nothing converted). Shows the "
                    "inputs and outputs with dtypes and dims (symbolic names of an ONNX "
                    "model, ranges of a dynamic-shape .om), the gears, op counts (aclnn "
                    "steps of a compiled .om, ONNX nodes otherwise), weights and arena "
                    "sizes, the opset and the conversion options recorded in the file "
                    "(--soc_version, --input_format, ...). --json prints OpenACL's schema "
                    "in the spirit of atc --mode=1: file, file_bytes, kind, format_version, "
                    "model_type, precision, inputs/outputs [{name, dtype, dims, ranges}], "
                    "gears {kind, values}, op_counts {aclnn|onnx: {op: n}}, graph {name, "
                    "op: [{name, type}]}, weights_bytes, weights_count, arena_bytes, "
                    "naive_bytes, opset, ir_version, producer, options, metadata. Exits 2 "
                    "on a file it cannot read.")
    inspect.add_argument("model", help="the .om or .onnx model")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(handler=_cmd_inspect)
