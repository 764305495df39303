"""``openacl convert``: an ONNX model to an offline model (.om), ATC's role; single-op models.

Examples::

    openacl convert model.onnx -o model.om --input-shape "x:1,3,640,640"
    openacl convert model.onnx -o model.om --input-shape "x:-1,3,224,224" --dynamic-batch 1,2,4,8
    openacl convert --singleop ops.json -o op_models
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["STATUS_BAD_INPUT", "parse_input_shapes", "register"]

STATUS_BAD_INPUT = 2  # exit status of unusable input (files, JSON, flags)


def parse_input_shapes(text: str, allow_dynamic: bool = True) -> dict[str, tuple]:
    """ATC's ``--input-shape``: ``"x:1,3,640,640;mask:1,128"`` -> {name: dims}. A dim is an
    int >= 0, ``-1`` (any size) or ATC's range ``low~high`` (``high`` -1: no limit), read as
    a (low, high) pair; ``allow_dynamic=False`` accepts fixed dims only.

    Raises:
        ValueError: naming the part that is not ``name:d1,d2,...`` with such dims.
    """
    shapes: dict[str, tuple] = {}
    for part in filter(None, (item.strip() for item in text.split(";"))):
        name, colon, dims = part.rpartition(":")
        try:
            shape = tuple(_dim(d.strip()) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            shape = None
        fixed = shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)
        if not colon or not name or shape is None or name in shapes or (
                not allow_dynamic and not fixed):
            kinds = "fixed dims >= 0" if not allow_dynamic else "dims >= 0, -1 or low~high"
            raise ValueError(f"--input-shape part {part!r} is not name:d1,d2,... with {kinds} "
                             f"(each name once)")
        shapes[name] = shape
    return shapes


def _dim(text: str) -> int | tuple[int, int]:
    """One dim of --input-shape: ``8``, ``-1`` or ``1~8`` / ``1~-1``."""
    low, tilde, high = text.partition("~")
    if tilde:
        pair = int(low), int(high)
        if pair[0] < 0 or (pair[1] != -1 and pair[1] < pair[0]):
            raise ValueError(text)
        return pair
    value = int(text)
    if value < -1:
        raise ValueError(text)
    return value


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.singleop:
        return _convert_singleop(args)
    if not args.model:
        print("openacl convert: give an ONNX model (openacl convert model.onnx -o model.om) "
              "or --singleop ops.json", file=sys.stderr)
        return STATUS_BAD_INPUT
    try:
        shapes = parse_input_shapes(args.input_shape or "")
        batches = None if args.dynamic_batch is None else [
            int(size) for size in args.dynamic_batch.split(",")]
        dims_gears, image_gears = (None if text is None else [
            [int(v) for v in gear.split(",")] for gear in text.split(";") if gear.strip()]
            for text in (args.dynamic_dims, args.dynamic_image_size))
    except ValueError as exc:
        print(f"openacl convert: {exc}", file=sys.stderr)
        return STATUS_BAD_INPUT
    from openacl.errors import AclError
    from openacl.model import converter

    output = args.output or os.path.splitext(args.model)[0] + ".om"
    try:  # conversion needs no runtime: folding evaluates with ONNX's reference evaluator
        report = converter.convert_onnx(args.model, output, shapes, batches,
                                        args.precision or "fp32", dims_gears, image_gears)
    except AclError as exc:
        print(f"openacl convert: {exc}", file=sys.stderr)
        return STATUS_BAD_INPUT
    print(converter.format_report(report))
    return 0


def _convert_singleop(args: argparse.Namespace) -> int:
    from openacl import singleop
    from openacl.errors import AclError

    output = args.output or "op_models"
    try:
        written = singleop.compile_singleop(args.singleop, output)
    except AclError as exc:
        print(f"openacl convert: {exc}", file=sys.stderr)
        return STATUS_BAD_INPUT
    for path in written:
        print(f"  {path}")
    print(f"{len(written)} single-op model(s) in {output}/ (use "
          f"acl.op.set_model_dir('{output}'))")
    return 0




def register(commands: argparse._SubParsersAction) -> None:
    """Add ``convert`` to the ``openacl`` command's subcommands."""
    convert = commands.add_parser(
        "convert", help="ONNX model -> offline model .om (ATC's role); single-op models",
        description="Convert an ONNX model (opsets 11-21) into an OpenACL offline model "
                    "(.om): import with fixed input shapes, constant folding, fusions (Conv + "
                    "BatchNorm / constant affine, HardSwish), dead code elimination, "
                    "lowering to aclnn operators, a static memory plan, weights "
                    "in one memory-mappable blob. Prints op counts before and after, weights, "
                    "arena and activation memory. Models are fp32, fp16 or mixed "
                    "(--precision), with static shapes or --dynamic-batch gears. With "
                    "--singleop, validate a CANN single-op JSON and "
                    "write one single-op file per op plus index.json into the -o directory, "
                    "for acl.op.set_model_dir. Exits 2 on unusable input.")
    convert.add_argument("model", nargs="?", help="the ONNX model")
    convert.add_argument("--singleop", metavar="OPS_JSON", help="the single-op JSON")
    convert.add_argument("-o", "--output",
                         help="the .om file (default: the model's name with .om), or the "
                              "directory of --singleop (default: op_models)")
    convert.add_argument("--input-shape", metavar="SHAPES",
                         help='input shapes, ATC\'s spelling: "x:1,3,640,640;mask:1,128"; a dim '
                              'of -1 or a range low~high (high -1: no limit) makes a '
                              'dynamic-shape model, specialised at run time')
    convert.add_argument("--precision", choices=("fp32", "fp16", "mixed"),
                         help="fp32 (default), fp16 (float16 weights and values) or mixed "
                              "(float16, sensitive ops in float32)")
    convert.add_argument("--dynamic-batch", metavar="SIZES",
                         help="batch sizes such as 1,2,4,8: one gear each, dim 0 of every "
                              "input (give it as -1 in --input-shape, or leave it dynamic)")
    convert.add_argument("--dynamic-dims", metavar="GEARS",
                         help='ATC\'s --dynamic_dims: values of the -1 dims of --input-shape '
                              'per gear, "1,128;4,128;8,128"')
    convert.add_argument("--dynamic-image-size", metavar="GEARS",
                         help='ATC\'s --dynamic_image_size: height,width per gear for each '
                              'input\'s two -1 dims, "224,224;448,448"')
    convert.set_defaults(handler=_cmd_convert)
