"""``openacl op ...``: the operator developer's tools.

Examples::

    openacl op new AddCustom --input x:float16,float32 --input y:float16,float32 \\
        --output z:float16,float32 --attr alpha:float=1.0 -o add_custom   # a project
    openacl op gen-data case.json -o build          # build/input/<name>.bin per input
    openacl op run add.json -o build                # CANN single-op JSON -> build/output/*.bin
    openacl op verify build/output/y.bin golden.bin --dtype float16 --standard ratio

Each subcommand is one ``add_<name>(subparsers)`` function listed in ``SUBCOMMANDS``; adding
a subcommand is writing that function and appending it there. Handlers return the exit
status: 0 success, 1 a failed check or operator, 2 unusable input (files, JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STATUS_OK = 0
STATUS_FAILED = 1  # a verification or an operator failed
STATUS_BAD_INPUT = 2  # a file or a description could not be used


def _load_json(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _shape(text: str) -> tuple[int, ...]:
    """``8,2048`` or ``[8, 2048]`` -> (8, 2048); ``""`` / ``[]`` -> ()."""
    text = text.strip().strip("[]()")
    try:
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape such as 8,2048, got {text!r}"
                                         ) from None


def _fail(command: str, message: Any, status: int = STATUS_BAD_INPUT) -> int:
    print(f"openacl op {command}: {message}", file=sys.stderr)
    return status


# -- gen-data ----------------------------------------------------------------------------------
def _cmd_gen_data(args: argparse.Namespace) -> int:
    from openacl import datagen

    try:
        case = datagen.case_from_json(_load_json(args.case))
        if args.seed is not None:
            case = datagen.Case(case.inputs, args.seed, case.name)
        arrays = datagen.generate_case(case)
    except (OSError, ValueError) as exc:
        return _fail("gen-data", exc)
    for name, array in arrays.items():
        path = datagen.write_bin(Path(args.output) / "input" / f"{name}.bin", array)
        print(f"{name}: {list(array.shape)} {array.dtype} -> {path}")
    return STATUS_OK


def add_gen_data(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "gen-data", help="generate a case's inputs as .bin files",
        description="Generate inputs from a case description (JSON: {\"seed\": 0, \"inputs\": "
                    "[{\"name\", \"shape\", \"dtype\", \"distribution\": uniform|normal, "
                    "\"range\": [low, high], \"mean\", \"std\", \"nan_ratio\", \"inf_ratio\", "
                    "\"neg_inf_ratio\", \"nan_at\", \"inf_at\", \"neg_inf_at\", \"value\"}]}; "
                    "a single-op JSON case's input_desc works too) into DIR/input/<name>.bin.")
    parser.add_argument("case", help="the case description (JSON)")
    parser.add_argument("-o", "--output", default=".", help="output directory (default: .)")
    parser.add_argument("--seed", type=int, help="override the case's seed")
    parser.set_defaults(handler=_cmd_gen_data)


# -- run ---------------------------------------------------------------------------------------
@contextmanager
def _runtime() -> Iterator[None]:
    """The runtime, initialised (device 0) for the command unless the caller already did."""
    import openacl

    if openacl.is_initialized():
        yield
        return
    openacl.init()
    try:
        openacl.rt.set_device(0)
        yield
    finally:
        openacl.finalize()


def _io_names(op_type: str, count: int, outputs: bool) -> list[str]:
    """CANN's IR names of an op type's inputs or outputs (x1, x2, y...); dynamic inputs get
    an index; unknown op types fall back to x0.. / y0..."""
    from openacl.op import OP_TYPES

    spec = OP_TYPES.get(op_type)
    declared = list(spec.outputs if outputs else spec.inputs) if spec else []
    names: list[str] = []
    for name in declared:
        if name.endswith("*"):
            names += [f"{name[:-1]}{i}" for i in range(count - len(declared) + 1)]
        else:
            names.append(name.rstrip("?"))
    fallback = "y" if outputs else "x"
    return [names[i] if i < len(names) else f"{fallback}{i}" for i in range(count)]


def _set_attr(handle: int, attr: Mapping[str, Any]) -> None:
    """One single-op JSON attr ({"name", "type", "value"}) onto an aclopAttr (parsed by
    ``openacl.singleop``, the one reader of CANN's single-op JSON)."""
    from openacl import singleop

    singleop.apply_attr(handle, *singleop.parse_attr(attr, "attr"))


def _case_inputs(case: Mapping[str, Any], names: list[str], base: Path,
                 input_dir: str | None, seed: int) -> list[Any]:
    """The input arrays of a single-op case (None for an absent optional input): read from
    ``data_file`` / ``input_dir/<name>.bin`` when given, else generated."""
    import numpy as np

    from openacl import datagen, singleop

    arrays: list[Any] = []
    for index, desc in enumerate(case.get("input_desc", [])):
        name = desc.get("name") or names[index]
        if str(desc.get("type", "")).upper() in singleop.ABSENT_TYPES:
            arrays.append(None)
            continue
        dtype = datagen.dtype_from_name(desc["type"])
        shape = tuple(int(d) for d in desc.get("shape", ()))
        source = desc.get("data_file")
        if source is None and input_dir is not None and (Path(input_dir) / f"{name}.bin"
                                                         ).exists():
            source = Path(input_dir) / f"{name}.bin"
        if source is not None:
            arrays.append(datagen.load_array(base / source, dtype, shape))
        else:
            spec = datagen.input_from_json({**desc, "name": name}, name)
            arrays.append(datagen.generate(spec, np.random.default_rng([seed, index])))
    return arrays


def run_case(case: Mapping[str, Any], base: Path = Path("."), input_dir: str | None = None,
             seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one single-op JSON case through ``openacl.op.execute_v2`` on the current device;
    returns (inputs, outputs) as name -> numpy array. The runtime must be initialised."""
    import numpy as np

    import openacl
    from openacl import dtypes, op
    from openacl.datagen import dtype_from_name
    from openacl.util import numpy_to_ptr

    op_type = case.get("op")
    if not isinstance(op_type, str):
        raise ValueError("a single-op case needs \"op\" (the op type)")
    in_descs, out_descs = case.get("input_desc", []), case.get("output_desc", [])
    in_names = [d.get("name") or n for d, n in zip(in_descs, _io_names(op_type, len(in_descs),
                                                                       False), strict=True)]
    out_names = [d.get("name") or n for d, n in zip(out_descs,
                                                    _io_names(op_type, len(out_descs), True),
                                                    strict=True)]
    arrays = _case_inputs(case, in_names, base, input_dir, seed)
    made: list[tuple[Callable[[int], None], int]] = []
    keep: list[Any] = []

    def desc_of(entry: Mapping[str, Any], array: Any) -> int:
        fmt = entry.get("format", "ND")
        if array is None:
            handle = openacl.create_tensor_desc(dtypes.DataType.ACL_DT_UNDEFINED, None,
                                                dtypes.Format.ACL_FORMAT_UNDEFINED)
        else:
            fmt = "UNDEFINED" if str(fmt).upper() == "RESERVED" else fmt
            handle = openacl.create_tensor_desc(dtypes.from_numpy_dtype(array.dtype),
                                                list(array.shape), dtypes.to_format(fmt))
        made.append((openacl.destroy_tensor_desc, handle))
        return handle

    def buffer_of(tensor: Any) -> int:
        handle = openacl.create_data_buffer(tensor.data_ptr if tensor is not None else 0,
                                            tensor.nbytes if tensor is not None else 0)
        made.append((openacl.destroy_data_buffer, handle))
        return handle

    attr = None
    try:
        input_descs, input_buffers = [], []
        for entry, array in zip(in_descs, arrays, strict=True):
            handle = desc_of(entry, array)
            tensor = None if array is None else openacl.to_device(array)
            keep.append(tensor)
            if array is not None and entry.get("is_const"):
                host = np.ascontiguousarray(array)
                keep.append(host)
                openacl.set_tensor_const(handle, numpy_to_ptr(host), host.nbytes)
            input_descs.append(handle)
            input_buffers.append(buffer_of(tensor))
        output_descs, output_buffers, outputs = [], [], []
        for entry in out_descs:
            dtype = dtype_from_name(entry["type"])
            shape = tuple(int(d) for d in entry.get("shape", ()))
            tensor = openacl.empty(shape, dtype)
            keep.append(tensor)
            outputs.append(tensor)
            output_descs.append(desc_of(entry, np.empty(shape, dtype)))
            output_buffers.append(buffer_of(tensor))
        if case.get("attr"):
            attr = op.create_attr()
            for item in case["attr"]:
                _set_attr(attr, item)
        op.execute_v2(op_type, input_descs, input_buffers, output_descs, output_buffers, attr)
        results = {name: tensor.numpy() for name, tensor in zip(out_names, outputs,
                                                                strict=True)}
    finally:
        if attr is not None:
            op.destroy_attr(attr)
        for destroy, handle in reversed(made):
            destroy(handle)
        for item in keep:
            if item is not None and hasattr(item, "free"):
                item.free()
    inputs = {name: array for name, array in zip(in_names, arrays, strict=True)
              if array is not None}
    return inputs, results


def _case_label(case: Any, index: int) -> str:
    name = case.get("name") or case.get("case_name") if isinstance(case, Mapping) else None
    op_type = case.get("op", "case") if isinstance(case, Mapping) else "case"
    return str(name or f"{index}_{op_type}")


def _cmd_run(args: argparse.Namespace) -> int:
    from openacl import datagen
    from openacl.errors import AclError

    try:
        loaded = _load_json(args.case)
    except (OSError, ValueError) as exc:
        return _fail("run", exc)
    cases = loaded if isinstance(loaded, list) else [loaded]
    many = isinstance(loaded, list)
    root = Path(args.output if args.output else f"{Path(args.case).stem}_run")
    base = Path(args.case).resolve().parent
    status = STATUS_OK
    with _runtime():
        for index, case in enumerate(cases):
            label = _case_label(case, index)
            directory = root / label if many else root
            try:
                if not isinstance(case, Mapping):
                    raise ValueError(f"a case is a JSON object, not {type(case).__name__}")
                inputs, outputs = run_case(case, base, args.input_dir, args.seed + index)
            except (AclError, ValueError, KeyError, TypeError, OSError) as exc:
                status = max(status, STATUS_FAILED)
                print(f"openacl op run: case {label}: {exc}", file=sys.stderr)
                continue
            for name, array in inputs.items():
                datagen.write_bin(directory / "input" / f"{name}.bin", array)
            saved = []
            for name, array in outputs.items():
                datagen.write_bin(directory / "output" / f"{name}.bin", array)
                datagen.save_array(directory / "output" / f"{name}.npy", array)
                saved.append(f"{name} {list(array.shape)} {array.dtype}")
            print(f"case {label}: {case['op']} -> {', '.join(saved)} in {directory / 'output'}")
    return status


def add_run(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "run", help="run operators described in CANN's single-op JSON",
        description="Run each case of a single-op JSON file (the atc --singleop input: one "
                    "object or a list of {\"op\", \"input_desc\": [{\"format\", \"shape\", "
                    "\"type\", \"name\"?}], \"output_desc\": [...], \"attr\": [{\"name\", "
                    "\"type\", \"value\"}]}) through openacl.op.execute_v2. Inputs are "
                    "generated (input_desc may carry gen-data keys: distribution, range, "
                    "nan_ratio...) or read from \"data_file\" / --input-dir/<name>.bin. "
                    "Writes DIR/input/<name>.bin and DIR/output/<name>.bin and .npy (a list "
                    "writes one DIR/<case>/ per case).")
    parser.add_argument("case", help="the single-op JSON file")
    parser.add_argument("-o", "--output", help="output directory (default: <json name>_run)")
    parser.add_argument("--input-dir", help="read inputs from DIR/<name>.bin where present")
    parser.add_argument("--seed", type=int, default=0, help="seed of generated inputs")
    parser.set_defaults(handler=_cmd_run)


# -- verify ------------------------------------------------------------------------------------
def _cmd_verify(args: argparse.Namespace) -> int:
    from openacl import datagen, verify

    try:
        actual = datagen.load_array(args.output, args.dtype, args.shape)
        golden = datagen.load_array(args.golden, args.golden_dtype or args.dtype, args.shape)
        report = verify.verify(actual, golden, args.dtype, args.standard)
    except (OSError, ValueError) as exc:
        return _fail("verify", exc)
    print(report.format(args.show))
    return STATUS_OK if report.passed else STATUS_FAILED


def add_verify(subcommands: argparse._SubParsersAction) -> None:
    from openacl.verify import MISMATCHES_SHOWN, STANDARDS

    parser = subcommands.add_parser(
        "verify", help="compare an output with its golden under a CANN precision standard",
        description="Compare OUTPUT with GOLDEN (.bin raw little-endian, or .npy) and print "
                    "CANN's report: the first mismatches with index, expected, actual and "
                    "relative difference, the error ratio, MERE and MARE. Exits 1 when the "
                    "standard fails, 2 when the files cannot be read.")
    parser.add_argument("output", help="the operator's output (.bin or .npy)")
    parser.add_argument("golden", help="the golden (.bin or .npy)")
    parser.add_argument("--dtype", required=True, help="output data type (float16, float32, "
                                                       "bfloat16, int32...)")
    parser.add_argument("--golden-dtype", help="the golden's data type if it differs "
                                               "(a float32 golden of a float16 output)")
    parser.add_argument("--standard", default="single_benchmark", choices=list(STANDARDS),
                        help="precision standard (default: single_benchmark)")
    parser.add_argument("--shape", type=_shape, help="reshape both to this shape (8,2048) so "
                                                     "mismatch indices are multi-dimensional")
    parser.add_argument("--show", type=int, default=MISMATCHES_SHOWN,
                        help=f"mismatches to print (default {MISMATCHES_SHOWN})")
    parser.set_defaults(handler=_cmd_verify)


# -- new ---------------------------------------------------------------------------------------
def _cmd_new(args: argparse.Namespace) -> int:
    import shlex

    from openacl.cli import scaffold

    words = ["openacl", "op", "new", args.op_type]
    for flag, values in (("--input", args.inputs), ("--output", args.outputs),
                         ("--attr", args.attrs)):
        for value in values:
            words += [flag, value]
    command = shlex.join(words + (["-o", args.output] if args.output else []))
    try:
        spec = scaffold.build_spec(args.op_type, args.inputs, args.outputs, args.attrs)
        written = scaffold.generate(spec, args.output, args.force, command)
    except scaffold.ScaffoldError as exc:
        return _fail("new", exc)
    except OSError as exc:
        return _fail("new", f"cannot write the project: {exc}")
    root = written[0].parent.parent
    print(f"created {spec.op_type} in {root}/ ({len(written)} files, "
          f"{len(spec.columns)} dtype column(s)):")
    for path in written:
        print(f"  {path.relative_to(root)}")
    print(f"next: cd {root} && python -m pytest -q tests && bash run.sh")
    return STATUS_OK


def add_new(subcommands: argparse._SubParsersAction) -> None:
    from openacl.cli.scaffold import ATTR_KINDS

    parser = subcommands.add_parser(
        "new", help="scaffold a custom-op project that passes its own tests",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Create a custom operator project: op/__init__.py (OpDef, infer-shape, "
                    "tiling, kernel),\ngolden.py (numpy reference), tests/test_op.py, "
                    "scripts/gen_data.py, run_op.py,\nverify_result.py, run.sh and README.md. "
                    "The generated kernel computes a placeholder\n(every output = the sum of "
                    "the inputs, times a float attr 'alpha' if declared) that\nits tests "
                    "check; replace it where the code says TODO(author).",
        epilog="example:\n  openacl op new AddCustom --input x:float16,float32 "
               "--input y:float16,float32 \\\n      --output z:float16,float32 "
               "--attr alpha:float=1.0 -o add_custom\n  cd add_custom && python -m pytest "
               "-q tests && bash run.sh\n\nExits 2 with a message naming the flag when a "
               "flag or the directory cannot be used.")
    parser.add_argument("op_type", metavar="OP_TYPE", help="CamelCase op type, e.g. AddCustom")
    parser.add_argument("--input", dest="inputs", action="append", required=True,
                        metavar="NAME:DTYPES",
                        help="an input and its dtypes, one per supported combination "
                             "(x:float16,float32); repeat for each input, in order")
    parser.add_argument("--output", dest="outputs", action="append", required=True,
                        metavar="NAME:DTYPES", help="an output, as --input")
    parser.add_argument("--attr", dest="attrs", action="append", default=[],
                        metavar="NAME:TYPE[=DEFAULT]",
                        help=f"an attribute; TYPE is one of {', '.join(ATTR_KINDS)}; lists "
                             f"as 1,2,3; no default makes it REQUIRED")
    parser.add_argument("-o", "--output-dir", dest="output",
                        help="project directory (default: ./<op_type in snake_case>)")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty directory, overwriting generated files")
    parser.set_defaults(handler=_cmd_new)


SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [add_new, add_gen_data,
                                                                   add_run, add_verify]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``op`` command group and its subcommands to the ``openacl`` parser."""
    group = commands.add_parser("op", help="operator developer tools: new, gen-data, run, verify",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("Examples::")[1].split("Each ")[0])
    subcommands = group.add_subparsers(dest="op_command", required=True)
    for add in SUBCOMMANDS:
        add(subcommands)
