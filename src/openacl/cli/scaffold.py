"""``openacl op new``: scaffold a custom-operator project that passes its own tests.

::

    openacl op new AddCustom --input x:float16,float32 --input y:float16,float32 \\
        --output-tensor z:float16,float32 --attr alpha:float=1.0 -o add_custom

``-o/--output`` is the project directory, as everywhere in ``openacl``; output tensors are
declared with ``--output-tensor`` (inputs with ``--input``, also spelled ``--input-tensor``).

The flags are parsed into an :class:`OpSpec` (every check raises :class:`ScaffoldError`
naming the flag), :func:`render` turns it into the project's files and :func:`generate`
writes them. The generated kernel computes a placeholder that is well defined for any
number of inputs and outputs: every output is the elementwise sum of the inputs (times
``alpha`` when a float attribute of that name exists), computed in float32 for 16/32-bit
floats and float64 otherwise, then cast to the output's dtype. ``golden.py`` holds the
same rule in numpy; the author replaces both where the generated code says ``TODO(author)``.

Project layout (``DIR`` defaults to ``./<op_type in snake_case>``)::

    op/__init__.py              OpDef, infer-shape, tiling (TilingData), kernel, register_op
    golden.py                   dtype columns, test attribute values, inputs, numpy golden
    tests/test_op.py            pytest: every dtype column through aclnn's two phases + errors
    scripts/gen_data.py         input/*.bin and output/golden_*.bin (openacl.tools.datagen)
    scripts/run_op.py           the application: load op/, run it, write output/*.bin
    scripts/verify_result.py    compare with the golden (openacl.tools.verify), exit 0 / 1
    run.sh                      gen -> run -> verify for every column, pass/fail line
    README.md
"""

from __future__ import annotations

import keyword
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ATTR_KINDS = ("int", "float", "bool", "str", "list_int", "list_float", "list_bool")
SUPPORTED_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                    "uint16", "int32", "uint32", "int64", "uint64", "bool")
# Names a parameter may not take: the kernel's own arguments and the module-level names the
# generated kernel and tests use (a parameter of that name would shadow them).
RESERVED_NAMES = frozenset({"workspace", "tiling", "np", "openacl", "custom", "aclnn", "rt",
                            "data", "start", "end", "result", "compute", "golden", "pytest",
                            "sum", "min", "max", "len", "tensor", "outputs", "inputs",
                            "attrs", "self"})
OP_TYPE_PATTERN = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
INPUT_FLAG, OUTPUT_FLAG = "--input", "--output-tensor"  # the tensor declarations' flags
PARAM_FLAGS = f"{INPUT_FLAG}/{OUTPUT_FLAG}"
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
TEST_ATTR_VALUES: dict[str, Any] = {"int": 2, "float": 2.0, "bool": True, "str": "value",
                                    "list_int": [1, 2], "list_float": [0.5, 2.0],
                                    "list_bool": [True, False]}  # for attrs with no default


class ScaffoldError(ValueError):
    """A flag that cannot make a project; the message names the flag and the value."""


@dataclass(frozen=True)
class ParamSpec:
    """An input or output: its name and one dtype per supported combination (column)."""

    name: str
    dtypes: tuple[str, ...]


@dataclass(frozen=True)
class AttrSpec:
    """An attribute: name, kind (``ATTR_KINDS``), and its default (absent: REQUIRED)."""

    name: str
    kind: str
    has_default: bool
    default: Any = None

    @property
    def test_value(self) -> Any:
        """The value the generated tests and scripts pass."""
        return self.default if self.has_default else TEST_ATTR_VALUES[self.kind]


@dataclass(frozen=True)
class OpSpec:
    op_type: str
    inputs: tuple[ParamSpec, ...]
    outputs: tuple[ParamSpec, ...]
    attrs: tuple[AttrSpec, ...]

    @property
    def snake_name(self) -> str:
        from openacl.ops.registry import snake_case

        return snake_case(self.op_type)

    @property
    def columns(self) -> list[dict[str, str]]:
        """The supported dtype combinations, each as {param name: dtype name}."""
        params = self.inputs + self.outputs
        return [{p.name: p.dtypes[i] for p in params} for i in range(len(params[0].dtypes))]

    @property
    def scales_by_alpha(self) -> bool:
        return any(a.name == "alpha" and a.kind == "float" for a in self.attrs)


# -- parsing the flags -------------------------------------------------------------------------
def _check_name(name: str, flag: str, text: str) -> None:
    if not NAME_PATTERN.match(name) or keyword.iskeyword(name):
        raise ScaffoldError(f"{flag} {text!r}: name {name!r} is not a Python identifier")
    if name in RESERVED_NAMES:
        raise ScaffoldError(f"{flag} {text!r}: name {name!r} is reserved by the generated "
                            f"code ({', '.join(sorted(RESERVED_NAMES))})")


def _dtype_name(text: str, flag: str, spec: str) -> str:
    from openacl.tools.datagen import dtype_from_name

    try:
        name = dtype_from_name(text).name
    except ValueError:
        name = None
    if name not in SUPPORTED_DTYPES:
        raise ScaffoldError(f"{flag} {spec!r}: unknown data type {text!r}; expected one of "
                            f"{', '.join(SUPPORTED_DTYPES)} (CANN aliases such as float, "
                            f"half, bf16 are accepted)")
    return name


def parse_param(text: str, flag: str) -> ParamSpec:
    """``x:float16,float32`` -> ParamSpec("x", ("float16", "float32"))."""
    name, colon, types = text.partition(":")
    name = name.strip()
    _check_name(name, flag, text)
    if not colon or not types.strip():
        raise ScaffoldError(f"{flag} {text!r}: give the data types after the name, as in "
                            f"{name}:float16,float32")
    return ParamSpec(name, tuple(_dtype_name(t.strip(), flag, text) for t in types.split(",")))


def _parse_bool(text: str, flag: str, spec: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ScaffoldError(f"{flag} {spec!r}: {text!r} is not a bool (true or false)")


def _parse_number(text: str, kind: str, flag: str, spec: str) -> int | float:
    try:
        value = int(text) if kind == "int" else float(text)
    except ValueError:
        article = "an" if kind == "int" else "a"
        raise ScaffoldError(f"{flag} {spec!r}: default {text!r} is not {article} {kind}"
                            ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ScaffoldError(f"{flag} {spec!r}: default {text!r} must be a finite float")
    return value


def _parse_default(kind: str, text: str, flag: str, spec: str) -> Any:
    if kind == "str":
        quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "'\""
        return text[1:-1] if quoted else text
    if kind == "bool":
        return _parse_bool(text, flag, spec)
    if kind in ("int", "float"):
        return _parse_number(text.strip(), kind, flag, spec)
    items = [item.strip() for item in text.strip().strip("[]").split(",") if item.strip()]
    element = kind.removeprefix("list_")
    if element == "bool":
        return [_parse_bool(item, flag, spec) for item in items]
    return [_parse_number(item, element, flag, spec) for item in items]


def parse_attr(text: str, flag: str = "--attr") -> AttrSpec:
    """``alpha:float=1.0`` -> optional float attr, default 1.0; ``axes:list_int`` -> REQUIRED."""
    name, colon, rest = text.partition(":")
    name = name.strip()
    _check_name(name, flag, text)
    kind, equals, default = rest.partition("=")
    kind = kind.strip()
    if not colon or kind not in ATTR_KINDS:
        raise ScaffoldError(f"{flag} {text!r}: the type must be one of {', '.join(ATTR_KINDS)}"
                            f", as in {name}:float=1.0 (no '=default' makes it REQUIRED)")
    if not equals:
        return AttrSpec(name, kind, has_default=False)
    return AttrSpec(name, kind, True, _parse_default(kind, default, flag, text))


def build_spec(op_type: str, inputs: list[str], outputs: list[str],
               attrs: list[str] | None = None) -> OpSpec:
    """Parse and cross-check every flag.

    Raises:
        ScaffoldError: a bad name, data type or attribute, dtype lists of different lengths,
            a repeated name, or an op type the built-in library already has.
    """
    from openacl.ops.registry import REGISTRY

    if not OP_TYPE_PATTERN.match(op_type or ""):
        raise ScaffoldError(f"OP_TYPE {op_type!r}: an operator type is a CamelCase identifier "
                            f"(letters and digits, first letter upper case) such as AddCustom")
    if op_type in REGISTRY:
        raise ScaffoldError(f"OP_TYPE {op_type!r}: a built-in operator has that name; choose "
                            f"another, such as {op_type}Custom")
    if not inputs or not outputs:
        raise ScaffoldError(f"{INPUT_FLAG} and {OUTPUT_FLAG}: an operator needs at least one "
                            f"of each")
    spec = OpSpec(op_type, tuple(parse_param(t, INPUT_FLAG) for t in inputs),
                  tuple(parse_param(t, OUTPUT_FLAG) for t in outputs),
                  tuple(parse_attr(t) for t in attrs or ()))
    params = spec.inputs + spec.outputs
    names = [p.name for p in params] + [a.name for a in spec.attrs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ScaffoldError(f"{PARAM_FLAGS}/--attr: names must be distinct; repeated: "
                            f"{', '.join(repeated)}")
    counts = {p.name: len(p.dtypes) for p in params}
    if len(set(counts.values())) != 1:
        flags = ", ".join(f"{OUTPUT_FLAG if p in spec.outputs else INPUT_FLAG} {p.name}: "
                          f"{len(p.dtypes)}" for p in params)
        raise ScaffoldError(f"{PARAM_FLAGS}: every parameter must list the same number of "
                            f"data types (column i of each forms the i-th supported "
                            f"combination); got {flags}")
    columns = [tuple(c.values()) for c in spec.columns]
    if len(set(columns)) != len(columns):
        raise ScaffoldError(f"{PARAM_FLAGS}: the dtype combinations repeat: {columns}")
    return spec


# -- rendering ---------------------------------------------------------------------------------
def _fill(template: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        template = template.replace(f"@@{key}@@", value)
    leftover = re.search(r"@@\w+@@", template)
    assert leftover is None, f"unfilled placeholder {leftover.group()}"
    return template


def _acl_name(dtype_name: str) -> str:
    from openacl import dtypes
    from openacl.tools.datagen import dtype_from_name

    return "openacl." + dtypes.from_numpy_dtype(dtype_from_name(dtype_name)).name


def _declaration(spec: OpSpec) -> str:
    lines = ["op = OpDef(OP_TYPE)"]
    for kind, params in (("input", spec.inputs), ("output", spec.outputs)):
        for param in params:
            types = ", ".join(_acl_name(t) for t in param.dtypes)
            formats = f"[openacl.ACL_FORMAT_ND] * {len(param.dtypes)}"
            lines.append(f'(op.{kind}("{param.name}").param_type(REQUIRED)\n'
                         f'    .data_type([{types}])\n'
                         f'    .format({formats}))')
    for attr in spec.attrs:
        kind = "OPTIONAL" if attr.has_default else "REQUIRED"
        default = repr(attr.default) if attr.has_default else ""
        lines.append(f'op.attr("{attr.name}").attr_type({kind}).{attr.kind}({default})')
    return "\n".join(lines)


def _semantics(spec: OpSpec) -> str:
    total = " + ".join(p.name for p in spec.inputs)
    if spec.scales_by_alpha:
        total = f"alpha * ({total})" if len(spec.inputs) > 1 else f"alpha * {total}"
    return "\n".join(f"    {p.name} = {total}" for p in spec.outputs)


OP_TEMPLATE = '''"""@@OP_TYPE@@: a custom operator package for OpenACL (made by ``openacl op new``).

Loading this package (``openacl.custom.load_package("op")``, or copying it under an
``$OPENACL_CUSTOM_OPP_PATH/vendors/`` directory) registers the operator and creates its
two-phase API by CANN's rule (inputs, then attributes, then outputs):
``aclnn@@OP_TYPE@@GetWorkspaceSize(@@SIGNATURE@@)`` / ``aclnn@@OP_TYPE@@`` in
``openacl.compat.aclnn`` and ``openacl.aclnn.@@SNAKE@@_get_workspace_size`` /
``@@SNAKE@@`` in the Pythonic face.

The generated kernel computes a PLACEHOLDER, elementwise over inputs of one shape:

@@SEMANTICS@@

in float32 for 16/32-bit floats and float64 otherwise, cast to each output's dtype.@@ALPHA_NOTE@@
To make it your operator, change the places marked ``TODO(author)`` below (infer_shape,
tiling, the kernel) and the numpy reference in ``golden.py`` to match, then run
``python -m pytest tests`` and ``bash run.sh``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openacl
from openacl import custom
from openacl.custom import @@CUSTOM_IMPORTS@@
from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError

OP_TYPE = "@@OP_TYPE@@"
ALIGN_BYTES = 32  # Ascend C moves global memory in 32-byte units: slices start aligned
MIN_ELEMENTS_PER_CORE = 1024  # below this many elements, one more core costs more than it saves
HALF_AND_SINGLE = ("float16", "bfloat16", "float32")  # computed in float32, as Ascend C casts


@dataclass
class @@OP_TYPE@@TilingData(TilingData):
    """What the host tells every block (BEGIN_TILING_DATA_DEF); packed little-endian."""

    total_length: np.uint64 = 0  # elements of every tensor
    block_dim: np.uint32 = 0  # blocks (cores) used
    block_length: np.uint64 = 0  # elements per block; the last block may get fewer@@ALPHA_FIELD@@


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def infer_shape(ctx: custom.InferShapeContext) -> None:
    """Outputs shaped like the first input; every input must have that shape.

    TODO(author): your operator's output shapes (ctx.set_output_shape) and dtypes
    (ctx.set_output_dtype; default: the declared dtype of the matched column).
    """
    shape = ctx.get_input_shape(0)
    for index, other in enumerate(ctx.input_shapes):
        if other != shape:
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{OP_TYPE}: input {index} has shape {list(other)}; the "
                           f"elementwise kernel needs every input shaped like input 0 "
                           f"{list(shape)}")
    for index in range(len(ctx.output_shapes)):
        ctx.set_output_shape(index, shape)


def tiling(ctx: custom.TilingContext) -> None:
    """Split the elements over the cores in 32-byte-aligned slices; no workspace.

    TODO(author): your split (tiling key, UB tiles via get_ub_size()) and workspace sizes.
    """
    total = int(np.prod(ctx.get_input_shape(0), dtype=np.int64))
    itemsize = min(np.dtype(d).itemsize for d in [*ctx.input_dtypes, *ctx.output_dtypes])
    align = max(1, ALIGN_BYTES // itemsize)  # elements per 32-byte unit of the narrowest dtype
    cores = ctx.get_platform_info().get_core_num()
    block_dim = max(1, min(cores, ceil_div(total, MIN_ELEMENTS_PER_CORE)))
    block_length = max(align, ceil_div(ceil_div(total, block_dim), align) * align)
    block_dim = max(1, ceil_div(total, block_length))  # aligned slices may need fewer blocks
    ctx.set_block_dim(block_dim)
    ctx.set_tiling_key(0)
    ctx.set_tiling_data(@@OP_TYPE@@TilingData(total_length=total, block_dim=block_dim,
                        @@INDENT@@block_length=block_length@@ALPHA_ARG@@))
    ctx.set_workspace_sizes([0])


def compute_dtype(dtype: np.dtype) -> type:
    return np.float32 if np.dtype(dtype).name in HALF_AND_SINGLE else np.float64


def @@SNAKE@@_kernel(@@KERNEL_ARGS@@, workspace, tiling):
    """One block: its slice of every output (the placeholder semantics above).

    TODO(author): what a block computes. Touch only this block's slice of each tensor.
    """
    data = @@OP_TYPE@@TilingData.from_buffer(tiling)
    start = get_block_idx() * data.block_length
    end = min(start + data.block_length, data.total_length)
    if start >= end:
        return  # more blocks than work
    for out in (@@OUTPUT_TUPLE@@):
        compute = compute_dtype(out.dtype)
        result = sum(tensor.reshape(-1)[start:end].astype(compute)
                     for tensor in (@@INPUT_TUPLE@@))@@ALPHA_SCALE@@
        out.reshape(-1)[start:end] = np.asarray(result).astype(out.dtype)


@@DECLARATION@@
op.set_infer_shape(infer_shape).set_tiling(tiling).set_kernel(@@SNAKE@@_kernel)
custom.register_op(op)
'''

GOLDEN_TEMPLATE = '''"""@@OP_TYPE@@'s numpy reference and test case, shared by tests/ and scripts/.

TODO(author): keep ``golden`` in step with the kernel in op/__init__.py, and ATTRS with the
values you want tested.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from openacl.tools import datagen

OP_TYPE = "@@OP_TYPE@@"
SNAKE_NAME = "@@SNAKE@@"  # openacl.aclnn.@@SNAKE@@_get_workspace_size / @@SNAKE@@
INPUTS = (@@INPUT_NAMES@@)
OUTPUTS = (@@OUTPUT_NAMES@@)
# The declared dtype combinations (column i of every parameter's data_type list).
DTYPE_COLUMNS = [
@@COLUMNS@@
]
# The attribute values tests and scripts pass, in declaration order.
ATTRS: dict[str, Any] = {@@ATTRS@@}
SHAPE = (8, 2048)  # the shape run.sh uses
STANDARD = "single_benchmark"  # openacl.tools.verify standard (integers are always exact)
SEED = 0


def input_case(column: int, shape: tuple[int, ...] = SHAPE, seed: int = SEED) -> datagen.Case:
    """How the inputs are generated: uniform in [-5, 5) ([0, 10) for unsigned integers)."""
    specs = []
    for name in INPUTS:
        dtype = datagen.dtype_from_name(DTYPE_COLUMNS[column][name])
        value_range = (0.0, 10.0) if dtype.kind == "u" else datagen.DEFAULT_RANGE
        specs.append(datagen.InputSpec(name, tuple(shape), dtype, value_range=value_range))
    return datagen.Case(tuple(specs), seed, f"{OP_TYPE}_{column}")


def make_inputs(column: int, shape: tuple[int, ...] = SHAPE, seed: int = SEED
                ) -> dict[str, np.ndarray]:
    return datagen.generate_case(input_case(column, shape, seed))


def output_dtypes(column: int) -> dict[str, np.dtype]:
    return {name: datagen.dtype_from_name(DTYPE_COLUMNS[column][name]) for name in OUTPUTS}


def golden(inputs: dict[str, np.ndarray], attrs: dict[str, Any], column: int
           ) -> dict[str, np.ndarray]:
    """The expected outputs, computed in float64 and cast to each output's dtype.

    TODO(author): your operator's reference (placeholder: @@GOLDEN_RULE@@).
    """
    total = sum(inputs[name].astype(np.float64) for name in INPUTS)@@GOLDEN_ALPHA@@
    return {name: np.asarray(total).astype(dtype) for name, dtype in output_dtypes(column).items()}
'''

TEST_TEMPLATE = '''"""@@OP_TYPE@@ through its aclnn two-phase API, checked against golden.py.

Run: python -m pytest tests   (from the project directory, or give its path)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import openacl
import pytest
from openacl import aclnn, custom, rt
from openacl.errors import ACLNN_ERR_PARAM_INVALID
from openacl.ops import REGISTRY
from openacl.tools import verify

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
import golden  # noqa: E402

SHAPES = [golden.SHAPE, (5, 999), (1,)]  # many blocks; an uneven tail; less work than blocks
SYNC_TIMEOUT_MS = 5000
UNDECLARED = ("float64", "int8", "uint8", "int16", "float32", "int32", "bool")


@pytest.fixture(scope="module", autouse=True)
def device():
    if golden.OP_TYPE not in REGISTRY:
        custom.load_package(PROJECT / "op")
    openacl.init()
    rt.set_device(0)
    stream = rt.create_stream()
    yield stream
    rt.destroy_stream(stream)
    rt.reset_device(0)
    openacl.finalize()


def phase_one(inputs: dict, attrs: dict, outputs: dict):
    """aclnn@@OP_TYPE@@GetWorkspaceSize(inputs..., attrs..., outputs...)."""
    get_workspace_size = getattr(aclnn, f"{golden.SNAKE_NAME}_get_workspace_size")
    return get_workspace_size(*(inputs[n] for n in golden.INPUTS),
                              *(attrs[n] for n in golden.ATTRS),
                              *(outputs[n] for n in golden.OUTPUTS))


def run(arrays: dict, column: int, stream: int) -> dict[str, np.ndarray]:
    inputs = {name: openacl.to_device(array) for name, array in arrays.items()}
    shape = arrays[golden.INPUTS[0]].shape
    outputs = {name: openacl.empty(shape, dtype)
               for name, dtype in golden.output_dtypes(column).items()}
    workspace = 0
    try:
        workspace_size, executor = phase_one(inputs, golden.ATTRS, outputs)
        if workspace_size:
            workspace = rt.malloc(workspace_size)
        getattr(aclnn, golden.SNAKE_NAME)(workspace, workspace_size, executor, stream)
        rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
        return {name: tensor.numpy() for name, tensor in outputs.items()}
    finally:
        if workspace:
            rt.free(workspace)
        for tensor in [*inputs.values(), *outputs.values()]:
            tensor.free()


def test_registered():
    definition = REGISTRY[golden.OP_TYPE]
    assert definition.c_name == f"aclnn{golden.OP_TYPE}"
    assert [p.name for p in definition.params] == [*golden.INPUTS, *golden.ATTRS,
                                                    *golden.OUTPUTS]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("column", range(len(golden.DTYPE_COLUMNS)),
                         ids=lambda c: "-".join(golden.DTYPE_COLUMNS[c].values()))
def test_matches_golden(device, column, shape):
    arrays = golden.make_inputs(column, shape)
    actual = run(arrays, column, device)
    expected = golden.golden(arrays, golden.ATTRS, column)
    for name in golden.OUTPUTS:
        dtype = golden.DTYPE_COLUMNS[column][name]
        report = verify.verify(actual[name], expected[name], dtype, golden.STANDARD)
        assert report.passed, f"output {name}:\\n{report.format()}"


def test_rejects_undeclared_dtype(device):
    declared = {column[golden.INPUTS[0]] for column in golden.DTYPE_COLUMNS}
    undeclared = next(name for name in UNDECLARED if name not in declared)
    arrays = golden.make_inputs(0, (4,))
    arrays[golden.INPUTS[0]] = arrays[golden.INPUTS[0]].astype(undeclared)
    with pytest.raises(openacl.AclError) as error:
        run(arrays, 0, device)
    assert error.value.code == ACLNN_ERR_PARAM_INVALID
    assert "declared combinations" in str(error.value)


def test_rejects_wrong_output_shape(device):
    inputs = {name: openacl.to_device(array)
              for name, array in golden.make_inputs(0, (4, 8)).items()}
    outputs = {name: openacl.empty((3,), dtype)
               for name, dtype in golden.output_dtypes(0).items()}
    try:
        with pytest.raises(openacl.AclError) as error:
            phase_one(inputs, golden.ATTRS, outputs)
    finally:
        for tensor in [*inputs.values(), *outputs.values()]:
            tensor.free()
    assert error.value.code == ACLNN_ERR_PARAM_INVALID
'''

TEST_SHAPE_MISMATCH = '''

def test_rejects_inputs_of_different_shapes(device):
    arrays = golden.make_inputs(0, (4, 8))
    arrays[golden.INPUTS[-1]] = arrays[golden.INPUTS[-1]][:2]
    with pytest.raises(openacl.AclError) as error:
        run(arrays, 0, device)
    assert error.value.code == ACLNN_ERR_PARAM_INVALID
    assert "shaped like input 0" in str(error.value)
'''

COMMON_SCRIPT_HEAD = '''from __future__ import annotations

@@ARGPARSE@@import json
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
import golden  # noqa: E402
'''

GEN_DATA_TEMPLATE = '''#!/usr/bin/env python3
"""Generate @@OP_TYPE@@'s inputs and golden for one dtype column.

Writes input/<input>.bin, output/golden_<output>.bin (raw little-endian, as the samples'
tofile does) and input/case.json (column, shape, dtypes) for run_op.py and verify_result.py.
"""

''' + COMMON_SCRIPT_HEAD.replace('@@ARGPARSE@@', 'import argparse\n') + '''
from openacl.tools import datagen  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\\n")[0])
    parser.add_argument("--column", type=int, default=0, help="dtype column (default 0)")
    parser.add_argument("--shape", default=",".join(map(str, golden.SHAPE)),
                        help="input shape, e.g. 8,2048")
    parser.add_argument("--seed", type=int, default=golden.SEED)
    args = parser.parse_args()
    if not 0 <= args.column < len(golden.DTYPE_COLUMNS):
        parser.error(f"--column must be in [0, {len(golden.DTYPE_COLUMNS)})")
    shape = tuple(int(d) for d in args.shape.split(",") if d.strip())
    inputs = golden.make_inputs(args.column, shape, args.seed)
    for name, array in inputs.items():
        datagen.write_bin(PROJECT / "input" / f"{name}.bin", array)
    for name, array in golden.golden(inputs, golden.ATTRS, args.column).items():
        datagen.write_bin(PROJECT / "output" / f"golden_{name}.bin", array)
    case = {"column": args.column, "shape": list(shape),
            "dtypes": golden.DTYPE_COLUMNS[args.column]}
    (PROJECT / "input" / "case.json").write_text(json.dumps(case, indent=2))
    print(f"[INFO]  column {args.column} {case['dtypes']}, shape {list(shape)}: inputs and "
          f"golden written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

RUN_OP_TEMPLATE = '''#!/usr/bin/env python3
"""Run @@OP_TYPE@@ on input/*.bin through its aclnn API; write output/<output>.bin.

The application side of CANN's AclNNInvocation flow: init, set device, load the custom op
package (op/), copy inputs to the device, phase 1 (GetWorkspaceSize), allocate the
workspace, phase 2 on a stream, synchronize with a timeout, copy outputs back.
"""

''' + COMMON_SCRIPT_HEAD.replace('@@ARGPARSE@@', '') + '''
import openacl  # noqa: E402
from openacl import aclnn, custom, rt  # noqa: E402
from openacl.tools import datagen  # noqa: E402

DEVICE_ID = 0
SYNC_TIMEOUT_MS = 5000


def main() -> int:
    case = json.loads((PROJECT / "input" / "case.json").read_text())
    shape, dtypes = tuple(case["shape"]), case["dtypes"]
    openacl.init()
    inputs, outputs, workspace, stream = {}, {}, 0, None
    try:
        rt.set_device(DEVICE_ID)
        custom.load_package(PROJECT / "op")
        stream = rt.create_stream()
        for name in golden.INPUTS:
            array = datagen.read_bin(PROJECT / "input" / f"{name}.bin", dtypes[name], shape)
            inputs[name] = openacl.to_device(array)
        for name in golden.OUTPUTS:
            outputs[name] = openacl.empty(shape, datagen.dtype_from_name(dtypes[name]))
@@ATTRS_LOCAL@@        workspace_size, executor = aclnn.@@SNAKE@@_get_workspace_size(
            @@CALL_ARGS@@)
        print(f"[INFO]  aclnn@@OP_TYPE@@GetWorkspaceSize: workspace {workspace_size} bytes")
        workspace = rt.malloc(workspace_size) if workspace_size else 0
        aclnn.@@SNAKE@@(workspace, workspace_size, executor, stream)
        rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
        for name, tensor in outputs.items():
            datagen.write_bin(PROJECT / "output" / f"{name}.bin", tensor.numpy())
    except (openacl.AclError, OSError, ValueError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    finally:
        for tensor in [*inputs.values(), *outputs.values()]:
            tensor.free()
        if workspace:
            rt.free(workspace)
        if stream is not None:
            rt.destroy_stream(stream)
        openacl.finalize()
    print("[INFO]  aclnn@@OP_TYPE@@ run success")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

VERIFY_TEMPLATE = '''#!/usr/bin/env python3
"""Compare output/<output>.bin with output/golden_<output>.bin under a CANN precision
standard (openacl.tools.verify); exit 0 when every output passes, 1 otherwise."""

''' + COMMON_SCRIPT_HEAD.replace('@@ARGPARSE@@', 'import argparse\n') + '''
from openacl.tools import datagen, verify  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\\n")[0])
    parser.add_argument("--standard", default=golden.STANDARD, choices=list(verify.STANDARDS))
    args = parser.parse_args()
    case = json.loads((PROJECT / "input" / "case.json").read_text())
    passed = True
    for name in golden.OUTPUTS:
        dtype = case["dtypes"][name]
        try:
            actual = datagen.read_bin(PROJECT / "output" / f"{name}.bin", dtype, case["shape"])
            expected = datagen.read_bin(PROJECT / "output" / f"golden_{name}.bin", dtype,
                                        case["shape"])
        except (OSError, ValueError) as exc:
            print(f"[ERROR] output {name}: {exc}", file=sys.stderr)
            return 1
        report = verify.verify(actual, expected, dtype, args.standard)
        print(f"output {name}:\\n{report.format()}")
        passed = passed and report.passed
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
'''

RUN_SH_TEMPLATE = '''#!/usr/bin/env bash
# @@OP_TYPE@@: for each dtype column (or only column $1): clean, generate inputs and golden,
# run the operator through its aclnn API, verify. Uses $PYTHON, else the Python that made
# this project, else python3. Ends with "@@OP_TYPE@@: test pass" (exit 0) or
# "@@OP_TYPE@@: test failed" (exit 1).
PROJECT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${PYTHON:-}" ]; then
    if [ -x "@@PYTHON@@" ]; then PYTHON="@@PYTHON@@"; else PYTHON=python3; fi
fi
COLUMNS=${1:-$(seq 0 $((@@COLUMN_COUNT@@ - 1)))}

fail() {
    echo "[ERROR] $1"
    echo "@@OP_TYPE@@: test failed"
    exit 1
}

cd "$PROJECT_DIR" || fail "cannot enter $PROJECT_DIR"
for column in $COLUMNS; do
    rm -rf input output
    mkdir -p input output
    "$PYTHON" scripts/gen_data.py --column "$column" || fail "column $column: gen_data failed"
    "$PYTHON" scripts/run_op.py || fail "column $column: run_op failed"
    "$PYTHON" scripts/verify_result.py || fail "column $column: verify failed"
    echo "[INFO]  column $column passed"
done
echo "@@OP_TYPE@@: test pass"
'''

README_TEMPLATE = '''# @@OP_TYPE@@

A custom operator for OpenACL, made by

    @@COMMAND@@

## Declaration

| parameter | kind | dtypes (one column per supported combination) |
|---|---|---|
@@PARAM_ROWS@@

@@ATTR_TEXT@@

Registering it (`openacl.custom.load_package("op")`) creates
`aclnn@@OP_TYPE@@GetWorkspaceSize(@@SIGNATURE@@)` and `aclnn@@OP_TYPE@@` in
`openacl.compat.aclnn`, `openacl.aclnn.@@SNAKE@@_get_workspace_size` / `@@SNAKE@@`, the
one-shot `openacl.ops.@@SNAKE@@` and `openacl.op.execute_v2("@@OP_TYPE@@", ...)`.

## What it computes now

A placeholder that works for any inputs and outputs, elementwise over inputs of one shape:

@@SEMANTICS@@

(float32 arithmetic for 16/32-bit floats, float64 otherwise, cast to each output's dtype).

## Make it yours

1. `op/__init__.py`: `infer_shape`, `tiling` (with its `@@OP_TYPE@@TilingData`) and
   `@@SNAKE@@_kernel`, each marked `TODO(author)`. The kernel runs once per block
   (`get_block_idx()` of `block_dim`) on contiguous numpy arrays and touches only its slice.
2. `golden.py`: the numpy reference, the attribute values under test, the input ranges.
3. Run the checks.

## Layout and checks

    op/__init__.py            the operator package
    golden.py                 dtype columns, test attributes, input generation, golden
    tests/test_op.py          pytest: every dtype column and a few shapes, plus error paths
    scripts/gen_data.py       input/*.bin, output/golden_*.bin, input/case.json
    scripts/run_op.py         the aclnn application: output/*.bin
    scripts/verify_result.py  CANN precision report per output (openacl.tools.verify)
    run.sh                    gen -> run -> verify for every column (or `bash run.sh 1`)

```
python -m pytest -q tests
bash run.sh
```
'''


def _quote_tuple(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "")


def render(spec: OpSpec, command: str = "", python: str | None = None) -> dict[str, str]:
    """The project's files, as {relative path: text}."""
    inputs = [p.name for p in spec.inputs]
    outputs = [p.name for p in spec.outputs]
    alpha = spec.scales_by_alpha
    signature = ", ".join([*inputs, *(a.name for a in spec.attrs), *outputs])
    other_attrs = [a.name for a in spec.attrs if not (alpha and a.name == "alpha")]
    alpha_note = "\n``alpha`` reaches the kernel through the tiling data." if alpha else ""
    if other_attrs:
        alpha_note += (f"\nThe placeholder ignores the attribute(s) {', '.join(other_attrs)}; "
                       f"a tiling function reads them\nwith ``ctx.get_attr(name)``.")
    call_args = ",\n            ".join([*(f'inputs["{n}"]' for n in inputs),
                           *(f'attrs["{a.name}"]' for a in spec.attrs),
                           *(f'outputs["{n}"]' for n in outputs)])
    columns = "\n".join(f"    {c!r}," for c in spec.columns)
    attrs = "".join(f"\n    {a.name!r}: {a.test_value!r}," for a in spec.attrs)
    attrs += "\n" if attrs else ""
    rule = " + ".join(inputs)
    optional = "OPTIONAL, " if any(a.has_default for a in spec.attrs) else ""
    values = {
        "CUSTOM_IMPORTS": f"{optional}REQUIRED, OpDef, TilingData, get_block_idx",
        "OP_TYPE": spec.op_type, "SNAKE": spec.snake_name, "SIGNATURE": signature,
        "SEMANTICS": _semantics(spec), "ALPHA_NOTE": alpha_note,
        "ALPHA_FIELD": "\n    alpha: np.float32 = 1.0  # the 'alpha' attribute" if alpha else "",
        "ALPHA_ARG": (",\n" + " " * (24 + len(f"{spec.op_type}TilingData(")) +
                      'alpha=ctx.get_attr("alpha")') if alpha else "",
        "ALPHA_SCALE": "\n        result = result * data.alpha" if alpha else "",
        "INDENT": " " * len(f"{spec.op_type}TilingData("),
        "KERNEL_ARGS": ", ".join(inputs + outputs),
        "INPUT_TUPLE": ", ".join(inputs) + ("," if len(inputs) == 1 else ""),
        "OUTPUT_TUPLE": ", ".join(outputs) + ("," if len(outputs) == 1 else ""),
        "DECLARATION": _declaration(spec), "CALL_ARGS": call_args,
        "INPUT_NAMES": _quote_tuple(inputs), "OUTPUT_NAMES": _quote_tuple(outputs),
        "COLUMNS": columns, "ATTRS": attrs,
        "ATTRS_LOCAL": "        attrs = golden.ATTRS\n" if spec.attrs else "",
        "GOLDEN_RULE": f"alpha * ({rule})" if alpha else rule,
        "GOLDEN_ALPHA": '\n    total = total * attrs["alpha"]' if alpha else "",
        "PYTHON": python or sys.executable, "COLUMN_COUNT": str(len(spec.columns)),
        "COMMAND": command or f"openacl op new {spec.op_type} ...",
        "PARAM_ROWS": "\n".join(
            f"| `{p.name}` | {'output' if p in spec.outputs else 'input'} (required, ND) | "
            f"{', '.join(p.dtypes)} |" for p in spec.inputs + spec.outputs),
        "ATTR_TEXT": "Attributes: " + ", ".join(
            f"`{a.name}` ({a.kind}, " + (f"default {a.default!r})" if a.has_default
                                         else "REQUIRED)") for a in spec.attrs)
        if spec.attrs else "No attributes.",
    }
    test = TEST_TEMPLATE + (TEST_SHAPE_MISMATCH if len(inputs) > 1 else "")
    return {
        "op/__init__.py": _fill(OP_TEMPLATE, values),
        "golden.py": _fill(GOLDEN_TEMPLATE, values),
        "tests/test_op.py": _fill(test, values),
        "scripts/gen_data.py": _fill(GEN_DATA_TEMPLATE, values),
        "scripts/run_op.py": _fill(RUN_OP_TEMPLATE, values),
        "scripts/verify_result.py": _fill(VERIFY_TEMPLATE, values),
        "run.sh": _fill(RUN_SH_TEMPLATE, values),
        "README.md": _fill(README_TEMPLATE, values),
    }


def generate(spec: OpSpec, directory: str | Path | None = None, force: bool = False,
             command: str = "") -> list[Path]:
    """Write the project into ``directory`` (default ``./<snake name>``); returns the paths.

    Raises:
        ScaffoldError: ``directory`` is a file, or a non-empty directory and not ``force``.
    """
    root = Path(directory) if directory is not None else Path(spec.snake_name)
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"-o {str(root)!r}: exists and is not a directory")
    if root.is_dir() and any(root.iterdir()) and not force:
        raise ScaffoldError(f"-o {str(root)!r}: the directory is not empty; choose another or "
                            f"pass --force to overwrite the generated files in it")
    written = []
    for relative, text in render(spec, command).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if relative == "run.sh" or relative.startswith("scripts/"):
            path.chmod(0o755)
        written.append(path)
    return written


__all__ = ["ATTR_KINDS", "AttrSpec", "OpSpec", "ParamSpec", "ScaffoldError",
           "SUPPORTED_DTYPES", "build_spec", "generate", "parse_attr", "parse_param", "render"]
