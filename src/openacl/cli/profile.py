"""``openacl profile``: per-operator time, calls, share and memory of a model; Chrome trace.

Examples::

    openacl profile model.om --runs 20 --trace trace.json
"""

from __future__ import annotations

import argparse
import sys

from openacl.cli.convert import STATUS_BAD_INPUT, parse_input_shapes

__all__ = ["register"]

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




def register(commands: argparse._SubParsersAction) -> None:
    """Add ``profile`` to the ``openacl`` command's subcommands."""
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
