"""``openacl convert`` and ``atc``: an ONNX model to an offline model (.om), ATC's role.

Both take ATC's command line as CANN's tutorials write it, next to OpenACL's own flags
(each ATC spelling is an alias of one of ours; ``--flag=value`` and ``--flag value`` both
work). Examples::

    openacl convert model.onnx -o model.om --input-shape "x:1,3,640,640"
    openacl convert model.onnx -o model.om --input-shape "x:-1,3,224,224" --dynamic-batch 1,2,4,8
    atc --model=model.onnx --framework=5 --output=model --input_shape="x:1,3,640,640" \
        --soc_version=Ascend310P3 --precision_mode=force_fp16
    atc --mode=1 --om=model.om --json=model.json        # the model as JSON (openacl inspect)
    openacl convert --singleop ops.json -o op_models   # default folder: build
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["ATC_FRAMEWORKS", "PRECISION_MODES", "STATUS_BAD_INPUT", "atc_main",
           "parse_input_shapes", "register"]

STATUS_BAD_INPUT = 2  # exit status of unusable input (files, JSON, flags)
ONNX_FRAMEWORK = 5  # ATC's --framework value of ONNX, the only one OpenACL reads
ATC_FRAMEWORKS = {0: "Caffe", 1: "MindSpore", 3: "TensorFlow", ONNX_FRAMEWORK: "ONNX"}
PRECISION_MODES = {  # ATC's --precision_mode -> OpenACL's --precision
    "force_fp32": "fp32", "cube_fp16in_fp32out": "fp32", "must_keep_origin_dtype": "fp32",
    "force_fp16": "fp16",
    "allow_mix_precision": "mixed", "allow_mix_precision_fp16": "mixed",
    "allow_fp32_to_fp16": "mixed",  # ATC: fp16 matmuls, fp32 kept elsewhere: our mixed
}
INPUT_FORMATS = ("NCHW", "NHWC", "ND", "NCDHW", "NDHWC")  # ATC's --input_format values
LOG_LEVELS = ("debug", "info", "warning", "error", "null")  # ATC's --log values
MODE_CONVERT, MODE_JSON, MODE_DISPLAY = 0, 1, 6  # ATC's --mode values OpenACL implements
ATC_MODES = {MODE_CONVERT: "convert a model to .om", MODE_JSON: "a model to JSON",
             3: "pre-check only", 5: "a GE dump graph to JSON",
             MODE_DISPLAY: "display a model"}
OM_SUFFIX = ".om"  # ATC adds it to --output when missing


class StrictParser(argparse.ArgumentParser):
    """A parser that refuses unknown arguments itself, with its own usage (a subcommand's
    parser otherwise hands them up, and the top-level usage names no subcommand)."""

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            unknown = [arg for arg in extras if arg.startswith("-")] or extras
            self.error(f"unrecognized argument{'s' if len(unknown) > 1 else ''}: "
                       f"{' '.join(unknown)}{self._nearest(unknown)} (every flag, ATC's "
                       f"spellings too: --help)")
        return parsed, extras

    def _nearest(self, unknown: list[str]) -> str:
        """``; did you mean --framework?`` for a flag that is a typo of a known one."""
        import difflib

        flags = [flag for action in self._actions for flag in action.option_strings]
        guesses = [match for arg in unknown if arg.startswith("--") for match in
                   difflib.get_close_matches(arg.split("=")[0], flags, n=1, cutoff=0.75)]
        return f"; did you mean {' / '.join(guesses)}?" if guesses else ""


def parse_input_shapes(text: str, allow_dynamic: bool = True) -> dict[str, tuple]:
    """ATC's ``--input-shape``: ``"x:1,3,640,640;mask:1,128"`` -> {name: dims}. A dim is an
    int >= 1, ``-1`` (any size) or ATC's range ``low~high`` (1 <= low <= high; ``high`` -1:
    no limit), read as a (low, high) pair; ``allow_dynamic=False`` accepts fixed dims only.

    Raises:
        ValueError: naming the part and the dim that is not ``name:d1,d2,...`` with such
            dims.
    """
    kinds = ("dims >= 1, -1 (any size) or low~high (1 <= low <= high, high -1: no limit)"
             if allow_dynamic else "fixed dims >= 1")
    shapes: dict[str, tuple] = {}
    for part in filter(None, (item.strip() for item in text.split(";"))):
        name, colon, dims = part.rpartition(":")
        if not colon or not name:
            raise ValueError(f"--input-shape part {part!r} is not name:d1,d2,... with {kinds}")
        if name in shapes:
            raise ValueError(f"--input-shape names {name!r} twice")
        shape = []
        for text_dim in (d.strip() for d in dims.split(",")) if dims.strip() else ():
            dim = _dim(text_dim)
            if dim is None or (not allow_dynamic and not isinstance(dim, int)) or (
                    not allow_dynamic and dim == -1):
                raise ValueError(f"--input-shape part {part!r}: the dim {text_dim!r} is not "
                                 f"one of {kinds}")
            shape.append(dim)
        shapes[name] = tuple(shape)
    return shapes


def _dim(text: str) -> int | tuple[int, int] | None:
    """One dim of --input-shape: ``8``, ``-1`` or ``1~8`` / ``1~-1``; None if it is not."""
    low, tilde, high = text.partition("~")
    try:
        if tilde:
            pair = int(low), int(high)
            return pair if pair[0] >= 1 and (pair[1] == -1 or pair[1] >= pair[0]) else None
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 or value == -1 else None


def _gears(text: str | None, flag: str) -> list[list[int]] | None:
    """--dynamic-dims / --dynamic-image-size: ``"1,128;8,128"`` -> [[1, 128], [8, 128]]."""
    if text is None:
        return None
    try:
        return [[int(v) for v in gear.split(",")] for gear in text.split(";") if gear.strip()]
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not gears of ints such as \"1,128;8,128\"") \
            from None


def _batches(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(size) for size in text.split(",")]
    except ValueError:
        raise ValueError(f"--dynamic-batch {text!r} is not batch sizes such as 1,2,4,8") \
            from None


def _framework(text: str | None) -> None:
    """ATC's --framework: 5 (ONNX) or nothing; the others are named and refused."""
    if text is None:
        return
    known = ", ".join(f"{number} ({name})" for number, name in ATC_FRAMEWORKS.items())
    try:
        number = int(text)
    except ValueError:
        number = None
    if number not in ATC_FRAMEWORKS:
        raise ValueError(f"--framework={text} is not one of {known}")
    if number != ONNX_FRAMEWORK:
        raise ValueError(f"--framework={number} ({ATC_FRAMEWORKS[number]}) is not supported: "
                         f"OpenACL converts ONNX models only (--framework={ONNX_FRAMEWORK}); "
                         f"export the model to ONNX first")


def _precision(args: argparse.Namespace) -> str:
    """--precision, or ATC's --precision_mode mapped to it (both: they must agree)."""
    mapped = PRECISION_MODES[args.precision_mode] if args.precision_mode else None
    if mapped and args.precision and mapped != args.precision:
        raise ValueError(f"--precision {args.precision} and --precision_mode="
                         f"{args.precision_mode} (which is {mapped}) disagree: give one")
    return args.precision or mapped or "fp32"


def _model_path(args: argparse.Namespace) -> str | None:
    if args.model and args.model_flag and args.model != args.model_flag:
        raise ValueError(f"two models given: {args.model!r} and --model={args.model_flag}")
    return args.model or args.model_flag


def _output_path(args: argparse.Namespace, model: str) -> str:
    """-o / --output, with .om added when missing (ATC's rule); default: the model's path
    with .om."""
    if not args.output:
        return os.path.splitext(model)[0] + OM_SUFFIX
    return args.output if args.output.endswith(OM_SUFFIX) else args.output + OM_SUFFIX


def _recorded(args: argparse.Namespace, precision: str) -> dict[str, Any]:
    """The conversion options the user gave, by ATC's names, for the file's metadata."""
    options: dict[str, Any] = {"framework": ONNX_FRAMEWORK, "precision": precision}
    names = {"soc_version": args.soc_version, "input_format": args.input_format,
             "precision_mode": args.precision_mode, "input_shape": args.input_shape,
             "dynamic_batch_size": args.dynamic_batch, "dynamic_dims": args.dynamic_dims,
             "dynamic_image_size": args.dynamic_image_size, "out_nodes": args.out_nodes,
             "log": args.log}
    options.update({name: value for name, value in names.items() if value is not None})
    return options


def _fail(args: argparse.Namespace, message: Any) -> int:
    print(f"{args.prog_name}: {message}", file=sys.stderr)
    return STATUS_BAD_INPUT


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.insert_op_conf is not None:
        return _fail(args, f"--insert_op_conf={args.insert_op_conf} (AIPP, image "
                           f"preprocessing in the model) is not supported: OpenACL has no "
                           f"AIPP; preprocess the images before they are the model's input")
    if args.mode not in (None, MODE_CONVERT, MODE_JSON, MODE_DISPLAY):
        return _fail(args, f"--mode={args.mode} ({ATC_MODES.get(args.mode, 'unknown')}) is not "
                           f"supported: modes {MODE_CONVERT} (convert), {MODE_JSON} (a model "
                           f"to JSON, with --om and --json) and {MODE_DISPLAY} (display, "
                           f"with --om)")
    if args.mode in (MODE_JSON, MODE_DISPLAY):
        return _model_to_json(args)
    if args.singleop:
        return _convert_singleop(args)
    try:
        _framework(args.framework)
        model = _model_path(args)
        precision = _precision(args)
        shapes = parse_input_shapes(args.input_shape or "")
        batches = _batches(args.dynamic_batch)
        dims_gears = _gears(args.dynamic_dims, "--dynamic-dims")
        image_gears = _gears(args.dynamic_image_size, "--dynamic-image-size")
        out_nodes = None if args.out_nodes is None else [
            entry.strip() for entry in args.out_nodes.split(";") if entry.strip()]
    except ValueError as exc:
        return _fail(args, exc)
    if not model:
        return _fail(args, f"give an ONNX model ({args.prog_name} model.onnx -o model.om, or "
                           f"--model=model.onnx) or --singleop ops.json")
    if out_nodes == []:
        return _fail(args, f"--out_nodes {args.out_nodes!r} names no output (give "
                           f"\"node:0;node2:1\" or output names \"out1;out2\")")
    from openacl.errors import AclError
    from openacl.model import converter

    output = _output_path(args, model)
    folder = os.path.dirname(output)
    if folder and not os.path.isdir(folder):  # say so before minutes of conversion
        return _fail(args, f"--output {args.output!r}: the folder {folder!r} does not exist")
    with _LogLevel(args.log), _Progress() as progress:
        try:  # conversion needs no runtime: folding evaluates with ONNX's reference evaluator
            report = converter.convert_onnx(
                model, output, shapes, batches, precision, dims_gears, image_gears,
                out_nodes=out_nodes, options=_recorded(args, precision), progress=progress)
        except AclError as exc:
            progress.close()
            return _fail(args, exc)
    print(converter.format_report(report))
    return 0


def _model_to_json(args: argparse.Namespace) -> int:
    """ATC's --mode=1 (--om, --json: the model as JSON) and --mode=6 (--om: displayed)."""
    from openacl.errors import AclError
    from openacl.model.describe import describe_model

    source = args.om or _model_path(args)
    if not source:
        return _fail(args, f"--mode={args.mode} needs --om=MODEL (an .om or .onnx file)")
    if args.mode == MODE_JSON and not args.json:
        return _fail(args, f"--mode={MODE_JSON} needs --json=FILE (where the JSON goes)")
    try:
        description = describe_model(source)
    except AclError as exc:
        return _fail(args, exc)
    if args.mode == MODE_DISPLAY:
        from openacl.cli.inspect import format_description

        print(format_description(description))
        return 0
    try:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(description, file, indent=2)
    except OSError as exc:
        return _fail(args, f"cannot write --json={args.json}: {exc}")
    print(f"{source} -> {args.json}")
    return 0


def _convert_singleop(args: argparse.Namespace) -> int:
    from openacl.aclop import singleop
    from openacl.errors import AclError

    output = args.output or singleop.DEFAULT_OUTPUT_DIR
    try:
        written = singleop.compile_singleop(args.singleop, output)
    except AclError as exc:
        return _fail(args, exc)
    for path in written:
        print(f"  {path}")
    print(f"{len(written)} single-op model(s) in {output}/ (use "
          f"acl.op.set_model_dir('{output}'))")
    return 0


class _LogLevel:
    """``--log``: the "openacl" logger at that level, printing to stderr, for the command's
    duration (phases at info; nothing is changed without --log)."""

    def __init__(self, level: str | None) -> None:
        self.level = level
        self.handler: Any = None

    def __enter__(self) -> _LogLevel:
        if self.level is None:
            return self
        import logging

        from openacl import log

        log.configure(self.level)
        if self.level != "null":
            self.handler = logging.StreamHandler(sys.stderr)
            self.handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: "
                                                        "%(message)s"))
            log.logger().addHandler(self.handler)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.handler is not None:
            from openacl import log

            log.logger().removeHandler(self.handler)


class _Progress:
    """The converter's ``progress`` callback: a bar of phases on a terminal (``cli.progress``)
    and an info line per phase on the "openacl" logger."""

    def __init__(self) -> None:
        self.bar: Any = None

    def __enter__(self) -> _Progress:
        from openacl.cli.progress import bar

        self.bar = bar(desc="convert", unit="phase")
        return self

    def __call__(self, phase: str) -> None:
        from openacl import log

        if log.enabled("info"):
            log.logger().info("convert: %s", phase)
        if self.bar is not None:
            self.bar.set_postfix_str(phase, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


DESCRIPTION = (
    "Convert an ONNX model (opsets 7 and up; older than 11 upgraded) into an OpenACL offline "
    "model (.om): import with the given input shapes, constant folding, fusions, dead code "
    "elimination, lowering to aclnn operators, a static memory plan, weights in one "
    "memory-mappable blob; models with shape ranges or dims left dynamic keep their graph "
    "and are specialised at run time. Prints op counts, weights, arena and activation "
    "memory. ATC's command line is accepted as CANN's tutorials write it (atc --model=x.onnx "
    "--framework=5 --output=x --input_shape=... --soc_version=...): each ATC flag below is "
    "an alias of OpenACL's, --flag=value and --flag value both work. --mode=1 --om=M "
    "--json=F writes a model as JSON (openacl inspect --json), --mode=6 --om=M displays it. "
    "With --singleop, validate a CANN single-op JSON and write one single-op file per op "
    "plus index.json into the -o directory, for acl.op.set_model_dir. Exits 2 on unusable "
    "input, naming the flag and the value.")


def _add_arguments(parser: argparse.ArgumentParser, prog_name: str) -> None:
    """The flags of ``openacl convert`` and ``atc`` (one parser definition for both)."""
    parser.add_argument("model", nargs="?", help="the ONNX model")
    parser.add_argument("--model", dest="model_flag", metavar="MODEL",
                        help="ATC's spelling of the model argument")
    parser.add_argument("--framework", metavar="N",
                        help=f"ATC's framework: {ONNX_FRAMEWORK} (ONNX) is the only one "
                             f"OpenACL reads; 0 Caffe, 1 MindSpore and 3 TensorFlow are "
                             f"refused")
    parser.add_argument("--singleop", metavar="OPS_JSON", help="the single-op JSON")
    parser.add_argument("-o", "--output",
                        help="the .om file, .om added when missing as ATC does (default: "
                             "the model's path with .om), or the directory of --singleop "
                             "(default: build)")
    parser.add_argument("--input-shape", "--input_shape", dest="input_shape",
                        metavar="SHAPES",
                        help='input shapes, ATC\'s spelling: "x:1,3,640,640;mask:1,128"; a dim '
                             'is >= 1, -1 (any size) or a range low~high (high -1: no limit); '
                             '-1 or a range makes a dynamic-shape model, specialised at run '
                             'time. With several dynamic inputs, give each')
    parser.add_argument("--input-format", "--input_format", dest="input_format",
                        choices=INPUT_FORMATS,
                        help="ATC's input layout; recorded in the model, no effect: OpenACL "
                             "runs the ONNX graph's own layout")
    parser.add_argument("--precision", choices=("fp32", "fp16", "mixed"),
                        help="fp32 (default), fp16 (float16 weights and values) or mixed "
                             "(float16, sensitive ops in float32)")
    parser.add_argument("--precision-mode", "--precision_mode", dest="precision_mode",
                        choices=tuple(PRECISION_MODES),
                        help="ATC's precision mode: force_fp32, cube_fp16in_fp32out and "
                             "must_keep_origin_dtype -> fp32; force_fp16 -> fp16; "
                             "allow_mix_precision(_fp16) -> mixed; allow_fp32_to_fp16 (ATC: "
                             "fp16 matrix ops, fp32 kept where supported) -> mixed. Unlike "
                             "ATC (force_fp16), the default is fp32")
    parser.add_argument("--soc-version", "--soc_version", dest="soc_version",
                        metavar="SOC",
                        help="ATC's target chip (e.g. Ascend310P3); recorded in the model and "
                             "shown by inspect, no effect")
    parser.add_argument("--dynamic-batch", "--dynamic_batch_size", dest="dynamic_batch",
                        metavar="SIZES",
                        help="batch sizes such as 1,2,4,8: one gear each, dim 0 of every "
                             "input (give it as -1 in --input-shape, or leave it dynamic)")
    parser.add_argument("--dynamic-dims", "--dynamic_dims", dest="dynamic_dims",
                        metavar="GEARS",
                        help='values of the -1 dims of --input-shape per gear, '
                             '"1,128;4,128;8,128"')
    parser.add_argument("--dynamic-image-size", "--dynamic_image_size",
                        dest="dynamic_image_size", metavar="GEARS",
                        help='height,width per gear for each input\'s two -1 dims, '
                             '"224,224;448,448"')
    parser.add_argument("--out-nodes", "--out_nodes", dest="out_nodes", metavar="NODES",
                        help='the model\'s outputs instead of the graph\'s: "node:0;node2:1" '
                             '(output index of a node) or value names "out1;out2"')
    parser.add_argument("--log", choices=LOG_LEVELS,
                        help="ATC's log level: the \"openacl\" logger at this level on "
                             "stderr (info: each conversion phase); null: silent")
    parser.add_argument("--insert-op-conf", "--insert_op_conf", dest="insert_op_conf",
                        metavar="AIPP_CFG",
                        help="ATC's AIPP configuration: refused (OpenACL has no AIPP)")
    parser.add_argument("--mode", type=int, metavar="N",
                        help=f"ATC's mode: {MODE_CONVERT} convert (default), {MODE_JSON} a "
                             f"model (.om or .onnx) to JSON (--om, --json), {MODE_DISPLAY} "
                             f"display a model (--om); 3 and 5 are refused")
    parser.add_argument("--om", metavar="MODEL", help="the model of --mode=1 / --mode=6")
    parser.add_argument("--json", metavar="FILE", help="the JSON file --mode=1 writes")
    parser.set_defaults(handler=_cmd_convert, prog_name=prog_name)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``convert`` to the ``openacl`` command's subcommands."""
    parser_class = commands._parser_class
    commands._parser_class = StrictParser  # convert refuses unknown flags with its usage
    try:
        convert = commands.add_parser(
            "convert", help="ONNX model -> offline model .om (ATC's role and flags); "
                            "single-op models",
            description=DESCRIPTION, allow_abbrev=False)
    finally:
        commands._parser_class = parser_class
    _add_arguments(convert, "openacl convert")


def build_atc_parser() -> argparse.ArgumentParser:
    """The ``atc`` command's parser: the same flags as ``openacl convert``."""
    import openacl

    parser = StrictParser(prog="atc", description=DESCRIPTION, allow_abbrev=False)
    parser.add_argument("--version", action="version",
                        version=f"atc (openacl {openacl.__version__})")
    _add_arguments(parser, "atc")
    return parser


def atc_main(argv: Sequence[str] | None = None) -> int:
    """The ``atc`` console script: ``openacl convert`` under ATC's name."""
    from openacl.cli import run_handler

    return run_handler(build_atc_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(atc_main())
