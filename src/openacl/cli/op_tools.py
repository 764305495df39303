"""``openacl op ...``: the operator developer's tools.

The examples and the rules the subcommands share (output folders, input names, the layout
of cases on disk, seeds, exit statuses) are ``OP_EPILOG``: what ``openacl op --help``
prints, kept in one place.

Each subcommand is one ``add_<name>(subparsers)`` function listed in ``SUBCOMMANDS``; adding
a subcommand is writing that function and appending it there. Handlers return the exit
status: 0 success, 1 a failed check or operator, 2 unusable input (files, JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

OP_DESCRIPTION = "The operator developer's tools: new, gen-data, run, verify, types."
OP_EPILOG = """examples:
    openacl op new AddCustom --input x:float16,float32 --input y:float16,float32 \\
        --output-tensor z:float16,float32 --attr alpha:float=1.0 -o add_custom  # a project
    openacl op gen-data ops.json -o build           # build/input/<name>.bin (a list: per case)
    openacl op run ops.json --input-dir build -o build  # build/output/<name>.bin and .npy
    openacl op verify build/output/y.bin golden.bin --dtype float16 --standard ratio
    openacl op types TopKV2 Range                   # the single-op types and their IR

rules the subcommands share:
  output   -o/--output DIR everywhere; gen-data, op run and convert --singleop write to
           ./build by default, op new to ./<op type in snake_case>
  names    a single-op case's inputs and outputs are named by the desc's "name", else by
           the op type's IR names (Add and MatMul: x1, x2 -> y)
  layout   one case (a JSON object): DIR/input/<name>.bin and DIR/output/<name>.bin; a
           list: DIR/<case>/input/... per case, <case> being the case's "name", else
           <index>_<op>; op gen-data -o D then op run --input-dir D -o D runs on those files
  seeds    case i of a file uses (--seed, else the case's "seed", else 0) + i, so op run
           without --input-dir generates the data gen-data writes
  status   0 success, 1 a failed check or operator, 2 unusable input (files, JSON, flags)
"""

STATUS_OK = 0
STATUS_FAILED = 1  # a verification or an operator failed
STATUS_BAD_INPUT = 2  # a file or a description could not be used
INPUT_FOLDER, OUTPUT_FOLDER = "input", "output"  # DIR[/<case>]/input, DIR[/<case>]/output
BIN_SUFFIX = ".bin"


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


def _case_folders(cases: Sequence[Any], root: Path, many: bool) -> list[tuple[str, Path]]:
    """(label, folder) per case: ``root`` for one case, ``root/<label>`` for a list.

    Raises:
        ValueError: two cases of a list with one label (they would share a folder).
    """
    from openacl.aclop import singleop

    labels = [singleop.case_label(case, index) for index, case in enumerate(cases)]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if many and repeated:
        raise ValueError(f"cases share a folder name: {', '.join(repeated)} (give each case "
                         f"its own \"name\")")
    return [(label, root / label if many else root) for label in labels]


def _case_seed(override: int | None, case_seed: int, index: int) -> int:
    """The seed of case ``index``: (``--seed``, else the case's own) + its index."""
    return (case_seed if override is None else override) + index


def _cases(path: str) -> tuple[list[Any], bool]:
    """The cases of a JSON file (an object is one case, a list many) and whether a list."""
    loaded = _load_json(path)
    return (loaded, True) if isinstance(loaded, list) else ([loaded], False)


# -- gen-data ----------------------------------------------------------------------------------
def _cmd_gen_data(args: argparse.Namespace) -> int:
    from openacl.cli import progress
    from openacl.tools import datagen

    try:
        cases, many = _cases(args.case)
        folders = _case_folders(cases, Path(args.output), many)
    except (OSError, ValueError) as exc:
        return _fail("gen-data", exc)
    base = Path(args.case).resolve().parent
    planned = []
    for index, (data, (label, folder)) in enumerate(zip(cases, folders, strict=True)):
        try:
            case = datagen.case_from_json(data)
        except ValueError as exc:
            return _fail("gen-data", f"case {label}: {exc}" if many else exc)
        seed = _case_seed(args.seed, case.seed, index)
        planned.append((label, folder, dataclasses.replace(case, seed=seed)))
    for label, folder, case in progress.bar(planned, total=len(planned), desc="op gen-data",
                                            unit="case"):
        try:
            arrays = datagen.generate_case(case, base)
        except (OSError, ValueError) as exc:
            return _fail("gen-data", f"case {label}: {exc}" if many else exc)
        for name, array in arrays.items():
            path = datagen.write_bin(folder / INPUT_FOLDER / f"{name}{BIN_SUFFIX}", array)
            print(f"{name}: {list(array.shape)} {array.dtype} -> {path}")
    return STATUS_OK


def add_gen_data(subcommands: argparse._SubParsersAction) -> None:
    from openacl.aclop.singleop import DEFAULT_OUTPUT_DIR

    parser = subcommands.add_parser(
        "gen-data", help="generate a case's inputs as .bin files",
        description="Generate inputs from a case description (JSON: {\"seed\": 0, \"inputs\": "
                    "[{\"name\", \"shape\", \"dtype\", \"distribution\": uniform|normal, "
                    "\"range\": [low, high], \"mean\", \"std\", \"nan_ratio\", \"inf_ratio\", "
                    "\"neg_inf_ratio\", \"nan_at\", \"inf_at\", \"neg_inf_at\", \"value\"}]}) "
                    "or from the single-op JSON op run takes (one op or a list; input_desc "
                    "entries may carry the same keys, a \"data_file\" is copied). Writes "
                    "DIR/input/<name>.bin; a list writes DIR/<case>/input/<name>.bin, <case> "
                    "being the case's \"name\", else <index>_<op>: the layout op run "
                    "--input-dir DIR reads. Inputs of a single-op case are named as op run "
                    "names them: the desc's \"name\", else the op type's IR name (MatMul: "
                    "x1, x2). Case i is seeded with (--seed, else its \"seed\", else 0) + i.")
    parser.add_argument("case", help="the case description (JSON)")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT_DIR,
                        help=f"output directory (default: {DEFAULT_OUTPUT_DIR})")
    parser.add_argument("--seed", type=int, help="override the cases' seed (case i: SEED + i)")
    parser.set_defaults(handler=_cmd_gen_data)


# -- run ---------------------------------------------------------------------------------------
def _set_attr(handle: int, attr: Mapping[str, Any]) -> None:
    """One single-op JSON attr ({"name", "type", "value"}) onto an aclopAttr (parsed by
    ``openacl.aclop.singleop``, the one reader of CANN's single-op JSON)."""
    from openacl.aclop import singleop

    singleop.apply_attr(handle, *singleop.parse_attr(attr, "attr"))


def input_files(case: Mapping[str, Any], folder: Path) -> tuple[dict[str, Path], list[str]]:
    """The ``.bin`` files case ``case`` reads from ``folder`` (name -> path) and every
    problem with them: a file missing, a file whose size is not the desc's shape times its
    item size, a ``.bin`` that is no input of the case (a name mismatch)."""
    from openacl.tools import datagen

    parsed = datagen.case_from_json(case)
    if not folder.is_dir():
        return {}, [f"{folder}: no such directory (op gen-data -o DIR writes "
                    f"DIR/{INPUT_FOLDER}, or DIR/<case>/{INPUT_FOLDER} for a list)"]
    found: dict[str, Path] = {}
    problems = []
    for spec in parsed.inputs:
        path = folder / f"{spec.name}{BIN_SUFFIX}"
        want = datagen.expected_bytes(spec)
        what = f"input '{spec.name}' ({spec.dtype} {list(spec.shape)}) needs {want} bytes"
        if not path.is_file():
            problems.append(f"{path}: missing; {what}, found 0 bytes")
        elif path.stat().st_size != want:
            problems.append(f"{path}: {what}, found {path.stat().st_size} bytes")
        else:
            found[spec.name] = path
    names = {spec.name for spec in parsed.inputs}
    for extra in sorted(p for p in folder.glob(f"*{BIN_SUFFIX}") if p.stem not in names):
        problems.append(f"{extra}: not an input of this case (its inputs: "
                        f"{', '.join(sorted(names)) or 'none'})")
    return found, problems


def _case_inputs(case: Mapping[str, Any], base: Path, files: Mapping[str, Path] | None,
                 seed: int | None) -> list[Any]:
    """The input arrays of a single-op case by position (None for an absent optional input):
    read from ``files`` when given, else from ``data_file`` or generated."""
    from openacl.tools import datagen

    parsed = datagen.case_from_json(case)
    if seed is not None:
        parsed = dataclasses.replace(parsed, seed=seed)
    if files is None:
        arrays = datagen.generate_case(parsed, base)
    else:
        arrays = {spec.name: datagen.read_bin(files[spec.name], spec.dtype, spec.shape)
                  for spec in parsed.inputs}
    by_position = {parsed.stream(i): arrays[spec.name] for i, spec in enumerate(parsed.inputs)}
    return [by_position.get(position) for position in range(len(case.get("input_desc") or ()))]


def run_case(case: Mapping[str, Any], base: Path = Path("."),
             files: Mapping[str, Path] | None = None, seed: int | None = None
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one single-op JSON case through ``openacl.op.execute_v2`` on the current device;
    returns (inputs, outputs) as name -> numpy array. Inputs come from ``files`` (name ->
    .bin, see ``input_files``), else ``data_file`` or generation with ``seed`` (None: the
    case's own). The runtime must be initialised."""
    import numpy as np

    import openacl
    from openacl import dtypes, op
    from openacl.aclop import singleop
    from openacl.tools.datagen import dtype_from_name
    from openacl.util import numpy_to_ptr

    op_type = case.get("op")
    if not isinstance(op_type, str):
        raise ValueError("a single-op case needs \"op\" (the op type)")
    in_descs, out_descs = case.get("input_desc") or [], case.get("output_desc") or []
    in_names = singleop.io_names(op_type, in_descs)
    out_names = singleop.io_names(op_type, out_descs, outputs=True)
    arrays = _case_inputs(case, base, files, seed)
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


FIRST_RUNTIME_CODE = 200000  # ACL codes below it are the caller's input (1xxxxx: params)


def _run_status(exc: BaseException) -> int:
    """A failed case's exit status: 2 when the case cannot be used (an unknown op type, descs
    or attributes the op refuses: ACL's 1xxxxx codes, unreadable JSON or files), 1 when the
    operator failed while it ran (a kernel that raised, a resource error)."""
    from openacl.errors import AclError

    if isinstance(exc, AclError) and exc.code >= FIRST_RUNTIME_CODE:
        return STATUS_FAILED
    return STATUS_BAD_INPUT


def _cmd_run(args: argparse.Namespace) -> int:
    from openacl.aclop import singleop
    from openacl.cli import progress
    from openacl.errors import AclError
    from openacl.tools import datagen

    try:
        cases, many = _cases(args.case)
        folders = _case_folders(cases, Path(args.output), many)
    except (OSError, ValueError) as exc:
        return _fail("run", exc)
    base = Path(args.case).resolve().parent
    sources: list[dict[str, Path] | None] = [None] * len(cases)
    if args.input_dir is not None:
        input_root = Path(args.input_dir)
        if not input_root.is_dir():
            return _fail("run", f"--input-dir {args.input_dir!r}: no such directory")
        problems = []
        for index, case in enumerate(cases):
            label = folders[index][0]
            folder = (input_root / label if many else input_root) / INPUT_FOLDER
            try:
                sources[index], found = input_files(case, folder)
            except (ValueError, TypeError, AttributeError):
                continue  # a case that cannot be read fails when it runs, below
            problems += [f"case {label}: {problem}" for problem in found]
        if problems:
            return _fail("run", f"--input-dir {args.input_dir!r} does not hold the cases' "
                                f"inputs:\n  " + "\n  ".join(problems))
    status = STATUS_OK
    with singleop.runtime_session():
        for index in progress.bar(range(len(cases)), total=len(cases), desc="op run",
                                  unit="case"):
            case, (label, directory) = cases[index], folders[index]
            try:
                if not isinstance(case, Mapping):
                    raise ValueError(f"a case is a JSON object, not {type(case).__name__}")
                seed = _case_seed(args.seed, datagen.case_from_json(case).seed, index)
                inputs, outputs = run_case(case, base, sources[index], seed)
            except (AclError, ValueError, KeyError, TypeError, OSError) as exc:
                status = max(status, _run_status(exc))
                print(f"openacl op run: case {label}: {exc}", file=sys.stderr)
                continue
            for name, array in inputs.items():
                datagen.write_bin(directory / INPUT_FOLDER / f"{name}{BIN_SUFFIX}", array)
            saved = []
            for name, array in outputs.items():
                datagen.write_bin(directory / OUTPUT_FOLDER / f"{name}{BIN_SUFFIX}", array)
                datagen.save_array(directory / OUTPUT_FOLDER / f"{name}.npy", array)
                saved.append(f"{name} {list(array.shape)} {array.dtype}")
            print(f"case {label}: {case['op']} -> {', '.join(saved)} in "
                  f"{directory / OUTPUT_FOLDER}")
    return status


def add_run(subcommands: argparse._SubParsersAction) -> None:
    from openacl.aclop.singleop import DEFAULT_OUTPUT_DIR

    parser = subcommands.add_parser(
        "run", help="run operators described in CANN's single-op JSON",
        description="Run each case of a single-op JSON file (the atc --singleop input: one "
                    "object or a list of {\"op\", \"input_desc\": [{\"format\", \"shape\", "
                    "\"type\", \"name\"?}], \"output_desc\": [...], \"attr\": [{\"name\", "
                    "\"type\", \"value\"}]}) through openacl.op.execute_v2. Inputs and outputs "
                    "are named by the desc's \"name\", else the op type's IR name (MatMul: "
                    "x1, x2 -> y), as gen-data names them. Inputs are generated (input_desc "
                    "may carry gen-data keys: distribution, range, nan_ratio...; case i is "
                    "seeded with (--seed, else its \"seed\", else 0) + i), read from "
                    "\"data_file\", or, with --input-dir DIR, all read from DIR/input/<name>.bin "
                    "(a list: DIR/<case>/input/<name>.bin), the layout gen-data -o DIR writes. "
                    "A missing DIR, a missing file, a file of the wrong size or a .bin that is "
                    "no input of its case exits 2 before anything runs. Writes "
                    "DIR/input/<name>.bin and DIR/output/<name>.bin and .npy (a list: "
                    "DIR/<case>/...). A case that fails does not stop the others; the exit "
                    "status is then 2 when a case cannot be used (an unknown op type, descs "
                    "or attributes the op refuses) and 1 when an operator failed while it "
                    "ran.")
    parser.add_argument("case", help="the single-op JSON file")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT_DIR,
                        help=f"output directory (default: {DEFAULT_OUTPUT_DIR})")
    parser.add_argument("--input-dir", metavar="DIR",
                        help="read every input from DIR/input/<name>.bin (a list: "
                             "DIR/<case>/input/<name>.bin), as op gen-data -o DIR wrote them")
    parser.add_argument("--seed", type=int, help="seed of generated inputs (case i: SEED + i; "
                                                 "default: the case's \"seed\", else 0)")
    parser.set_defaults(handler=_cmd_run)


# -- verify ------------------------------------------------------------------------------------
def _cmd_verify(args: argparse.Namespace) -> int:
    from openacl.tools import datagen, verify

    try:
        actual = datagen.load_array(args.output, args.dtype, args.shape)
        golden = datagen.load_array(args.golden, args.golden_dtype or args.dtype, args.shape)
        report = verify.verify(actual, golden, args.dtype, args.standard)
    except (OSError, ValueError) as exc:
        return _fail("verify", exc)
    print(report.format(args.show))
    return STATUS_OK if report.passed else STATUS_FAILED


def add_verify(subcommands: argparse._SubParsersAction) -> None:
    from openacl.tools.verify import MISMATCHES_SHOWN, STANDARDS

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
def _looks_like_a_tensor(value: str) -> bool:
    """Whether ``-o VALUE`` is a tensor declaration (``z:float16``), the old meaning of
    ``--output`` here, rather than a directory."""
    from openacl.cli import scaffold

    if ":" not in value or Path(value).exists():
        return False
    try:
        scaffold.parse_param(value, scaffold.OUTPUT_FLAG)
    except scaffold.ScaffoldError:
        return False
    return True


def _cmd_new(args: argparse.Namespace) -> int:
    import shlex

    from openacl.cli import scaffold

    if args.output and _looks_like_a_tensor(args.output):
        return _fail("new", f"-o/--output {args.output!r}: -o/--output is the project "
                            f"directory; declare an output tensor with "
                            f"{scaffold.OUTPUT_FLAG} {args.output}")
    if not args.outputs:
        return _fail("new", f"{scaffold.OUTPUT_FLAG} is required: declare each output tensor "
                            f"as {scaffold.OUTPUT_FLAG} NAME:DTYPES (-o/--output is the "
                            f"project directory)")
    words = ["openacl", "op", "new", args.op_type]
    for flag, values in ((scaffold.INPUT_FLAG, args.inputs),
                         (scaffold.OUTPUT_FLAG, args.outputs), ("--attr", args.attrs)):
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
    from openacl.cli.scaffold import ATTR_KINDS, INPUT_FLAG, OUTPUT_FLAG

    parser = subcommands.add_parser(
        "new", help="scaffold a custom-op project that passes its own tests",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Create a custom operator project: op/__init__.py (OpDef, infer-shape, "
                    "tiling, kernel),\ngolden.py (numpy reference), tests/test_op.py, "
                    "scripts/gen_data.py, run_op.py,\nverify_result.py, run.sh and README.md. "
                    "The generated kernel computes a placeholder\n(every output = the sum of "
                    "the inputs, times a float attr 'alpha' if declared) that\nits tests "
                    "check; replace it where the code says TODO(author).\n\n-o/--output is "
                    "the project directory, as in every openacl command; tensors are\n"
                    f"declared with {INPUT_FLAG} and {OUTPUT_FLAG}.",
        epilog="example:\n  openacl op new AddCustom --input x:float16,float32 "
               "--input y:float16,float32 \\\n      --output-tensor z:float16,float32 "
               "--attr alpha:float=1.0 -o add_custom\n  cd add_custom && python -m pytest "
               "-q tests && bash run.sh\n\nExits 2 with a message naming the flag when a "
               "flag or the directory cannot be used.")
    parser.add_argument("op_type", metavar="OP_TYPE", help="CamelCase op type, e.g. AddCustom")
    parser.add_argument(INPUT_FLAG, "--input-tensor", dest="inputs", action="append",
                        required=True, metavar="NAME:DTYPES",
                        help="an input tensor and its dtypes, one per supported combination "
                             "(x:float16,float32); repeat for each input, in order")
    parser.add_argument(OUTPUT_FLAG, dest="outputs", action="append", default=[],
                        metavar="NAME:DTYPES",
                        help=f"an output tensor, as {INPUT_FLAG} (at least one; checked by the "
                             f"command, so -o z:float16 gets a hint)")
    parser.add_argument("--attr", dest="attrs", action="append", default=[],
                        metavar="NAME:TYPE[=DEFAULT]",
                        help=f"an attribute; TYPE is one of {', '.join(ATTR_KINDS)}; lists "
                             f"as 1,2,3; no default makes it REQUIRED")
    parser.add_argument("-o", "--output", dest="output", metavar="DIR",
                        help="project directory (default: ./<op_type in snake_case>)")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty directory, overwriting generated files")
    parser.set_defaults(handler=_cmd_new)


def _signature(spec: Any) -> str:
    """``Name(inputs) -> (outputs)  attr: Kind = default, ...``: an op type as its IR has
    it; ``?`` an optional input, ``...`` a dynamic one, ``*`` a value input read on the host
    (it decides the output shape)."""
    from openacl.aclop.attr import ATTR_KIND_NAMES
    from openacl.aclop.types import REQUIRED

    def operand(name: str) -> str:
        base = name.rstrip("?*")
        marks = "*" if base in spec.values else ""
        return base + marks + ("?" if name.endswith("?") else
                               "..." if name.endswith("*") else "")

    outputs = ", ".join(n[:-1] + "..." if n.endswith("*") else n for n in spec.outputs)
    def default(value: Any) -> str:  # a DataType by its name (DT_INT32's ACL_INT32)
        return f" = {value.name}" if isinstance(value, enum.Enum) else f" = {value!r}"

    attrs = ", ".join(f"{a.name}: {ATTR_KIND_NAMES[a.kind]}" +
                      ("" if a.default is REQUIRED else default(a.default))
                      for a in spec.attrs)
    text = f"{spec.name}({', '.join(operand(n) for n in spec.inputs)}) -> ({outputs})"
    return f"{text}  {attrs}" if attrs else text


def _cmd_types(args: argparse.Namespace) -> int:
    from openacl.aclop.types import OP_TYPES, near_op_types

    unknown = [name for name in args.names if name not in OP_TYPES]
    if unknown:
        hints = "; ".join(f"{name} (near: {', '.join(near_op_types(name)) or 'none'})"
                          for name in unknown)
        return _fail("types", f"no single-op type {hints}; 'openacl op types' lists all "
                              f"{len(OP_TYPES)}")
    for name in args.names or sorted(OP_TYPES):
        print(_signature(OP_TYPES[name]))
    return STATUS_OK


def add_types(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "types", help="list the single-op (aclop) types execute_v2 and op run take",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The op types openacl.op.execute_v2 / acl.op.execute_v2 and 'op run' "
                    "accept, each as CANN's IR\n(REG_OP) declares it: inputs (? optional, "
                    "... dynamic, * a value input read on the\nhost, which decides the output "
                    "shape), outputs, and attributes with their kind and default.",
        epilog="example:\n  openacl op types            # all of them\n  openacl op types "
               "TopKV2 Range\n\nExits 2 naming an unknown type (with the near ones).")
    parser.add_argument("names", nargs="*", metavar="OP_TYPE",
                        help="op types to show (default: every one)")
    parser.set_defaults(handler=_cmd_types)


SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [add_new, add_gen_data,
                                                                   add_run, add_verify,
                                                                   add_types]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``op`` command group and its subcommands to the ``openacl`` parser."""
    group = commands.add_parser("op", help="operator developer tools: new, gen-data, run, "
                                           "verify, types",
                                description=OP_DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=OP_EPILOG)
    subcommands = group.add_subparsers(dest="op_command", required=True)
    for add in SUBCOMMANDS:
        add(subcommands)
