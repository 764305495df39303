"""CANN's own operator test cases (ATK) run against OpenACL's aclnn operators.

CANN's operator repositories ship, next to each operator, an ATK case file
(``<op>/tests/**/atk_aclnn<Op>.json``): a JSON list of cases, each naming the operator
(``aclnn_name``), its inputs in argument order (``inputs``: tensors with dtype, shape and a
value range; scalars; attributes; lists of those) and the precision rule (``standard``).
The cases carry no expected values: the golden is computed here, in float64, by a
*golden function* written per operator (``tests/atk_goldens/<family>.py``).

How a case runs (``run_case``):

1. **Inputs** (``make_inputs``), in ATK order, entries of dtype ``non_param`` (layout
   notes such as "NCHW") dropped:
   - ``tensor``: an array of ``shape`` and ``dtype``; ``range_values`` ``[lo, hi]`` draws
     uniformly (integers: ``hi`` excluded, as numpy's randint; bools: either), a number /
     ``"inf"`` / ``"nan"`` / a bool fills the tensor with it, ``{"name": "nd", "mean":
     [..], "std": [..]}`` draws a normal distribution whose mean and spread are drawn
     from those ranges. A tensor with no
     shape (an optional one left out) is ``None``.
   - ``scalar``: a Python number (the operator gets it as an aclScalar of the entry's
     dtype): a number is taken as it is, ``[lo, hi]`` or an interval string ``"( 0, 5 ]"``
     draws one inside.
   - ``attr``: the value as written (int, float, bool, str, list).
   - a list entry (``tensors``, ``tensor_tuple``): a tensor list; (``attrs``,
     ``attr_tuple``): an int/bool/float array; (``scalars``): a scalar list.
   Draws come from ``numpy.random.default_rng(case id)``: a case always gets the same data.
2. **Binding**: the inputs bind in order to the operator's input arguments (those the
   caller provides, in declaration order; ``@golden(params=...)`` names them instead when
   CANN's ATK order differs from the aclnn argument order). Arguments left over keep their
   declared defaults; an ATK input bound to an output argument (some suites list the
   output among the inputs) goes to the golden only. An attribute's value is then read
   by its argument's kind: ``[lo, hi]`` for an int or float argument (a seed, a
   probability) is a range to draw from; a one-element list is its element; 0 / 1 for a
   bool argument is False / True (a number written as a string: nonzero); a dtype name
   (``"bfloat16"`` / ``["float16"]``) for an aclDataType argument is that type; an array
   written as one-element lists is their elements; a tensor of shape [] bound to an
   optional tensor argument is absent (CANN's harness passes "no bias" so).
   The golden receives the values as bound.
3. **Our run**: the one-shot helper ``openacl.ops.<op>`` (the operator infers and allocates
   its outputs, as ``aclnn*GetWorkspaceSize`` + ``aclnn*`` would with them) on device
   copies of the inputs; results are the returned tensors (in-place operators return the
   tensors they wrote), a tensor-list output expanded into its tensors.
4. **Golden**: the golden function is called with the same inputs, tensors as torch tensors
   widened to float64 (ints to int64, complex to complex128, bools stay bool), lists as
   lists, scalars and attributes as Python values. It returns the expected output(s): one
   tensor / array, or a tuple in the order of the operator's results.
   A case that leaves a required tensor out (``"null"``) is one of CANN's error cases: it
   passes when phase 1 refuses with ACLNN_ERR_PARAM_NULLPTR (161001).
5. **Comparison**, per output: same shape; then ``openacl.tools.verify`` with the standard the
   case names, at our output's dtype: ``single_bm`` / ``default`` / ``double_benchmark`` /
   the fused variants -> CANN's single-benchmark MERE/MARE standard against the float64
   golden; a float output that fails it is judged by CANN's double benchmark
   (``verify.double_benchmark``), the golden run on float32 inputs being the second,
   working-precision benchmark: a sum cancelling to small values errs in any float32
   kernel, and passes only if ours errs no more than twice as much; ``md5`` / ``equal`` -> exact;
   ``stand_quantize`` -> integers within one quantum. Integer and bool outputs are always
   compared exactly. ``@golden(check=...)`` replaces the comparison (random operators:
   the check looks at our outputs' statistics, given the inputs).

Writing a golden::

    from atk_driver import golden

    @golden("Celu")
    def celu(x, alpha):
        return torch.nn.functional.celu(x, alpha)

``golden(op, *, params=None, check=None, skip=None, with_dtypes=False, prepare=None)``:
``params`` the aclnn argument names the ATK inputs bind to, in ATK order (a name starting
with ``_`` marks an input that is no aclnn argument: the golden gets it, the operator
not); ``prepare(inputs) -> inputs`` derives inputs the suite's harness derives (indices
from a forward pool, sorted maps) before both runs; ``check(outputs,
inputs)`` an assertion over our outputs (numpy arrays) instead of a golden comparison, for
random operators (the decorated function is then not called and may just ``pass``);
``skip(inputs)`` returns a reason string for a case the operator is documented not to
take on CPU (say why in the reason), else None (it is asked twice: on the inputs as the
case writes them, then on the values as bound, attribute ranges drawn); ``with_dtypes``
passes the list of the inputs' original numpy dtypes (``None`` for non-tensors) as the
golden's first argument; ``standard`` replaces the case's standard (say why: an INT8
output quantized from a float32 chain is ``stand_quantize``, one quantum apart where two
float32 ``exp`` implementations round a value on either side of a half).

Cases whose inputs exceed ``MAX_CASE_BYTES`` are skipped with that reason; a case whose
operator OpenACL does not register, or that has no golden, is counted as not run.
"""

from __future__ import annotations

import json
import lzma
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

TESTS = Path(__file__).resolve().parent
SAMPLE = TESTS / "data" / "atk" / "sample.json.xz"  # the CI sample (tools/atk.py sample)
MAX_CASE_BYTES = 256 << 20  # inputs of a case this machine runs, bytes
QUANTUM_SLACK = 1  # stand_quantize: integer outputs may differ by this much

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES: dict[str, np.dtype] = {
    **{name: np.dtype(np.float16) for name in ("fp16", "float16", "half")},
    **{name: BF16 for name in ("bf16", "bfloat16")},
    **{name: np.dtype(np.float32) for name in ("fp32", "float32", "float")},
    **{name: np.dtype(np.float64) for name in ("fp64", "float64", "double")},
    **{name: np.dtype(getattr(np, name)) for name in
       ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "complex64", "complex128")},
    "int": np.dtype(np.int64), "int64_t": np.dtype(np.int64), "int8_t": np.dtype(np.int8),
    "bool": np.dtype(np.bool_), "attr_bool": np.dtype(np.bool_),
}
NON_PARAM = "non_param"
LIST_TENSORS = frozenset({"tensors", "tensor_tuple"})
LIST_SCALARS = frozenset({"scalars"})
INTERVAL = re.compile(r"^\s*([\[(])\s*([-+\w.]+)\s*,\s*([-+\w.]+)\s*([\])])\s*$")
EXACT_STANDARDS = frozenset({"md5", "equal"})
GOLDEN_ONLY = "_"  # a params name starting so: an ATK input that is no aclnn argument
ABSENT = ("default", "null")  # a tensor's range_values meaning: an optional one left out


# -- goldens ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Golden:
    """How one operator's cases are checked (see the module docstring)."""

    op: str
    fn: Callable[..., Any]
    params: tuple[str, ...] | None = None
    check: Callable[[list[np.ndarray], list[Any]], None] | None = None
    skip: Callable[[list[Any]], str | None] | None = None
    with_dtypes: bool = False
    prepare: Callable[[list[Any]], list[Any]] | None = None
    standard: str | None = None


GOLDENS: dict[str, Golden] = {}


def golden(op: str, *, params: Iterable[str] | None = None,
           check: Callable[[list[np.ndarray], list[Any]], None] | None = None,
           skip: Callable[[list[Any]], str | None] | None = None,
           with_dtypes: bool = False,
           prepare: Callable[[list[Any]], list[Any]] | None = None,
           standard: str | None = None) -> Callable[[Callable], Callable]:
    """Register the golden of aclnn operator ``op`` (CANN's name without the prefix)."""

    def register(fn: Callable) -> Callable:
        if op in GOLDENS:
            raise ValueError(f"a golden for {op!r} is already registered "
                             f"({GOLDENS[op].fn.__module__})")
        GOLDENS[op] = Golden(op, fn, tuple(params) if params is not None else None, check,
                             skip, with_dtypes, prepare, standard)
        return fn

    return register


def load_goldens() -> dict[str, Golden]:
    """Import every module of ``tests/atk_goldens`` (each registers its goldens)."""
    import importlib
    import pkgutil

    import atk_goldens

    for info in pkgutil.iter_modules(atk_goldens.__path__):
        importlib.import_module(f"atk_goldens.{info.name}")
    return GOLDENS


# -- cases ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One ATK case: the operator, where it comes from, its raw JSON."""

    op: str  # aclnn name without the prefix
    source: str  # "<repository>:<path of the ATK file>"
    index: int  # position in its file
    data: dict[str, Any] = field(compare=False, repr=False)

    @property
    def key(self) -> str:
        """The ATK file's stem, naming the suite the case belongs to (an operator may have
        several: atk_aclnnLayerNorm_noFunctional.json)."""
        return Path(self.source.split(":", 1)[1]).stem.removeprefix("atk_aclnn")

    @property
    def standard(self) -> str:
        acc = (self.data.get("standard") or {}).get("acc", "default")
        return next(iter(acc)) if isinstance(acc, dict) else str(acc)


def op_name(raw: str) -> str:
    """CANN's operator name from an ATK ``aclnn_name`` ("aclnnCelu" or "Celu")."""
    return raw.removeprefix("aclnn")


def cases_of(source: str, data: Any) -> list[Case]:
    """The cases of one ATK file's parsed JSON."""
    items = data if isinstance(data, list) else [data]
    return [Case(op_name(str(item.get("aclnn_name", ""))), source, index, item)
            for index, item in enumerate(items)
            if isinstance(item, dict) and item.get("aclnn_name") and "inputs" in item]


def load_sample(path: Path = SAMPLE) -> list[Case]:
    """The cases of the sample file ``tools/atk.py sample`` wrote (JSON, xz-compressed)."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        payload = json.load(handle)
    return [Case(item["op"], item["source"], item["index"], item["case"])
            for item in payload["cases"]]


# -- inputs -----------------------------------------------------------------------------
def _dtype(name: Any) -> np.dtype:
    try:
        return DTYPES[str(name).lower()]
    except KeyError:
        raise ValueError(f"ATK dtype {name!r} is not one this driver knows") from None


def _number(text: str) -> float:
    return float(text)  # accepts "inf", "-inf", "nan"


def _bounds(spec: Any) -> tuple[float, float, bool, bool] | None:
    """(low, high, low closed, high closed) of a ``[lo, hi]`` list or interval string. A
    list's high end is open for integers (the ATK harness draws them with numpy's randint:
    an index range [0, n] holds valid indices only) and closed for floats."""
    if isinstance(spec, list) and len(spec) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec):
        return float(spec[0]), float(spec[1]), True, not all(isinstance(v, int) for v in spec)
    if isinstance(spec, str):
        match = INTERVAL.match(spec)
        if match:
            return (_number(match.group(2)), _number(match.group(3)), match.group(1) == "[",
                    match.group(4) == "]")
    return None


def _draw(rng: np.random.Generator, spec: Any, dtype: np.dtype,
          shape: tuple[int, ...]) -> np.ndarray:
    """Values of ``dtype`` and ``shape`` as ``range_values`` describes them."""
    if isinstance(spec, list) and spec and all(isinstance(v, bool) for v in spec):
        spec = [int(min(spec)), int(max(spec))]  # [False, True]: either
    if isinstance(spec, list) and len(spec) == 1:
        spec = spec[0]  # ["inf"], [3]: that one value
    bounds = _bounds(spec)
    if isinstance(spec, dict):  # {"name": "nd", "mean": [..], "std": [..]}
        mean = rng.uniform(*spec.get("mean", (0.0, 0.0)))
        std = rng.uniform(*spec.get("std", (1.0, 1.0)))
        values = rng.normal(mean, std, shape)
    elif bounds is not None:
        low, high, _, high_closed = bounds
        if dtype.kind in "iub":  # [lo, hi] of an integer tensor: numpy's randint, hi excluded
            closed = high_closed or dtype.kind == "b"  # [0, 1] of a bool tensor: either
            values = rng.integers(math.ceil(low), math.floor(high) + (1 if closed else 0),
                                  shape, endpoint=False) if high > low else np.full(shape, low)
        else:
            values = rng.uniform(low, high, shape)
    elif isinstance(spec, (bool, int, float)) or isinstance(spec, str):
        values = np.full(shape, _number(spec) if isinstance(spec, str) else spec)
    else:
        values = rng.uniform(-1.0, 1.0, shape)
    if dtype.kind == "b":
        return np.asarray((values != 0) if not isinstance(spec, list) else values.astype(bool))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = np.clip(np.rint(values), info.min, info.max)
    if dtype.kind == "c":
        imaginary = _draw(rng, spec, np.dtype(np.float64), shape)
        return (values + 1j * imaginary).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(dtype)


def _scalar(rng: np.random.Generator, spec: Any, dtype: np.dtype) -> Any:
    """One scalar argument's value, a Python number of ``dtype``'s kind."""
    value = _draw(rng, spec, dtype, ()).item()
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    return value if dtype.kind == "c" else float(value)


def _entry(rng: np.random.Generator, entry: dict[str, Any]) -> Any:
    kind, spec = entry.get("type"), entry.get("range_values")
    if kind in ("tensor", "tensors", "tensor_tuple"):
        if entry.get("shape") is None or spec in ABSENT or (
                isinstance(spec, list) and len(spec) == 1 and spec[0] in ABSENT):
            return None
        return _draw(rng, spec, _dtype(entry["dtype"]), tuple(int(d) for d in entry["shape"]))
    if kind in ("scalar", "scalars"):
        return _scalar(rng, spec, _dtype(entry["dtype"]))
    if kind in ("attrs", "attr_tuple") and _bounds(spec) is not None:
        return _scalar(rng, spec, _dtype(entry["dtype"]))  # one element, drawn from a range
    return spec  # attr / attrs / attr_tuple: the value as written


def _is_non_param(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("dtype") == NON_PARAM


def make_inputs(case: Case) -> list[Any]:
    """The case's inputs in ATK order (see the module docstring), ``non_param`` dropped."""
    rng = np.random.default_rng(int(case.data.get("id", case.index)) & 0xFFFFFFFF)
    inputs: list[Any] = []
    for entry in case.data["inputs"]:
        if _is_non_param(entry):
            continue
        if isinstance(entry, list):
            inputs.append([_entry(rng, item) for item in entry if not _is_non_param(item)])
        else:
            inputs.append(_entry(rng, entry))
    return inputs


def scalar_dtypes(case: Case) -> list[np.dtype | None]:
    """Per input (in ``make_inputs``' order), the dtype of an aclScalar entry, else None."""
    found: list[np.dtype | None] = []
    for entry in case.data["inputs"]:
        if _is_non_param(entry):
            continue
        found.append(_dtype(entry["dtype"]) if isinstance(entry, dict) and
                     entry.get("type") == "scalar" else None)
    return found


def input_bytes(case: Case) -> int:
    """Bytes of the case's tensor inputs, from their shapes (no data made)."""
    total = 0
    for entry in case.data["inputs"]:
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, dict) and item.get("type") in ("tensor", "tensors",
                                                                "tensor_tuple"):
                shape = item.get("shape")
                if shape is not None:
                    try:
                        itemsize = _dtype(item["dtype"]).itemsize
                    except ValueError:
                        itemsize = 8
                    total += math.prod(int(d) for d in shape) * itemsize
    return total


# -- running ----------------------------------------------------------------------------
class NotRun(Exception):
    """A case that cannot run here, with the reason (skipped, not failed)."""


def _to_torch(value: Any, working: bool = False) -> Any:
    """An input as the golden takes it: floats widened to float64 (``working``: to float32,
    the working precision of the second benchmark), ints to int64, complex to complex128
    (complex64)."""
    import torch

    if isinstance(value, np.ndarray):
        wide = value
        if value.dtype.kind == "f" or value.dtype == BF16:
            wide = value.astype(np.float32 if working else np.float64)
        elif value.dtype.kind in "iu":
            wide = value.astype(np.int64)
        elif value.dtype.kind == "c":
            wide = value.astype(np.complex64 if working else np.complex128)
        return torch.from_numpy(np.ascontiguousarray(wide).reshape(wide.shape))  # 0-d stays
    if isinstance(value, list):
        return [_to_torch(v, working) for v in value]
    return value


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu()
        if value.dtype.is_floating_point:
            value = value.double()
        return value.numpy()
    return np.asarray(value)


def _dtypes_of(inputs: list[Any]) -> list[Any]:
    return [v.dtype if isinstance(v, np.ndarray) else
            ([x.dtype if isinstance(x, np.ndarray) else None for x in v]
             if isinstance(v, list) else None) for v in inputs]


def _device(value: Any) -> Any:
    import openacl

    if isinstance(value, np.ndarray):
        return openacl.to_device(value)
    if isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
        return [openacl.to_device(v) for v in value]
    return value


def _free(value: Any) -> None:
    from openacl.tensor import Tensor

    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, Tensor):
            item.free()


def _saturated(expected: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The golden with the values that round past ``dtype``'s range made infinite, as
    rounding into the output dtype makes them (float16: 65520 and up; 65519 stays finite)."""
    wide = np.asarray(expected, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = wide.astype(dtype)
    overflow = np.isinf(rounded.astype(np.float64)) & np.isfinite(wide)
    return np.where(overflow, np.copysign(np.inf, wide), wide)


def _compare(ours: np.ndarray, expected: np.ndarray, standard: str, what: str,
             benchmark: Callable[[], np.ndarray | None] | None = None) -> None:
    """Compare one output with its golden under the case's standard. Where the single
    benchmark fails a float output, the double benchmark judges it, given ``benchmark``
    (the golden at working precision)."""
    from openacl.tools.verify import double_benchmark, verify

    if ours.shape != expected.shape:
        raise AssertionError(f"{what}: shape {list(ours.shape)}, golden "
                             f"{list(expected.shape)}")
    if ours.dtype.kind in "iub" and standard == "stand_quantize":
        diff = np.abs(ours.astype(np.int64) - np.rint(expected.astype(np.float64)))
        if diff.size and diff.max() > QUANTUM_SLACK:
            raise AssertionError(f"{what}: {int((diff > QUANTUM_SLACK).sum())} element(s) "
                                 f"off by more than {QUANTUM_SLACK} quantum")
        return
    if ours.dtype.kind in "iub":
        expected = expected.astype(ours.dtype) if expected.dtype.kind != "f" or np.all(
            np.isfinite(expected)) else expected
    if ours.dtype.kind == "f" or ours.dtype == BF16:
        expected = _saturated(expected, ours.dtype)
    rule = "exact" if standard in EXACT_STANDARDS else "single_benchmark"
    report = verify(ours, expected, ours.dtype, rule)
    if report.passed:
        return
    second = benchmark() if benchmark is not None and rule == "single_benchmark" and (
        ours.dtype.kind == "f" or ours.dtype == BF16) else None
    if second is not None and second.shape == ours.shape:
        judged = double_benchmark(ours, expected, _saturated(second, ours.dtype).astype(
            ours.dtype), ours.dtype)
        if judged.passed:
            return
        raise AssertionError(f"{what}:\n{report.format()}\n{judged.format()}")
    raise AssertionError(f"{what}:\n{report.format()}")


def _typed_scalar(value: Any, dtype: np.dtype | None) -> Any:
    """An aclScalar entry's value as a numpy scalar of its ATK dtype (a Python float would
    become an ACL_FLOAT scalar and lose an fp64 value's precision)."""
    if dtype is None or value is None or isinstance(value, (np.ndarray, list, str)):
        return value
    if dtype.kind == "b" or isinstance(value, bool):
        return np.bool_(value)
    return dtype.type(value)


def _fit_attributes(case: Case, op: Any, names: tuple[str, ...], inputs: list[Any]
                    ) -> list[Any]:
    """Attribute values read by the kind of the argument they bind to: a ``[lo, hi]`` given
    for an int or float argument (a seed, a probability) is a range to draw from (seeded by
    the case id, after the inputs); a dtype name (``"bfloat16"``, ``["float16"]``) for an
    aclDataType argument is that data type."""
    from openacl import dtypes

    kinds = {p.name: p.kind for p in op.params}
    optional = {p.name for p in op.params if p.optional}
    rng = np.random.default_rng((int(case.data.get("id", case.index)) + 1) & 0xFFFFFFFF)
    fitted = list(inputs)
    for position, (name, value) in enumerate(zip(names, inputs, strict=False)):
        kind = kinds.get(name)
        if kind == "tensor" and name in optional and isinstance(value, np.ndarray) and \
                value.ndim == 0:
            fitted[position] = None  # shape [] for an optional tensor: CANN's "absent"
            continue
        if kind in ("int_array", "float_array", "bool_array") and isinstance(value, list) and \
                value and all(isinstance(v, list) and len(v) == 1 for v in value):
            fitted[position] = [v[0] for v in value]  # [[1], [7]]: the elements
            continue
        if kind in ("int", "float", "bool", "str") and isinstance(value, list) and len(
                value) == 1:
            value = fitted[position] = value[0]  # one value written as a list
        if kind == "bool" and isinstance(value, str):
            fitted[position] = _number(value) != 0  # "inf" / "nan": nonzero, true in C
            continue
        if kind == "bool" and isinstance(value, int) and value in (0, 1):
            fitted[position] = bool(value)  # a bool written as 0 / 1
            continue
        if kind in ("int", "float") and isinstance(value, list) and len(value) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            low, high = sorted(value)
            fitted[position] = (int(rng.integers(int(low), int(high) + 1)) if kind == "int"
                                else float(rng.uniform(low, high)))
        elif kind == "dtype" and isinstance(value, (str, list)):
            text = value[0] if isinstance(value, list) and value else value
            if isinstance(text, str):
                fitted[position] = dtypes.from_numpy_dtype(_dtype(text.removeprefix("torch.")))
    return fitted


def _flat(result: Any) -> list[Any]:
    """Outputs in order, a tensor-list output expanded into its tensors (a Foreach
    operator's out list; a golden's list or tuple)."""
    items = result if isinstance(result, (tuple, list)) else [result]
    flat: list[Any] = []
    for item in items:
        flat.extend(_flat(item) if isinstance(item, (tuple, list)) else [item])
    return flat


def _expect_null_error(op: Any, arguments: dict[str, Any], missing: list[str]) -> None:
    """A required tensor is null: phase 1 must refuse with ACLNN_ERR_PARAM_NULLPTR."""
    import openacl.ops
    from openacl.errors import ACLNN_ERR_PARAM_NULLPTR, AclError

    try:
        getattr(openacl.ops, op.snake_name)(**arguments)
    except AclError as exc:
        if exc.code != ACLNN_ERR_PARAM_NULLPTR:
            raise AssertionError(f"aclnn{op.name} with {', '.join(missing)} null raised "
                                 f"{exc.code}, not ACLNN_ERR_PARAM_NULLPTR") from exc
        return
    finally:
        for value in arguments.values():
            _free(value)
    raise AssertionError(f"aclnn{op.name} ran with the required {', '.join(missing)} null")


def _skip(entry: Golden, inputs: list[Any]) -> None:
    """Raise ``NotRun`` with the golden's reason when its ``skip`` names one."""
    reason = entry.skip(inputs) if entry.skip is not None else None
    if reason:
        raise NotRun(reason)


def run_case(case: Case, goldens: dict[str, Golden] | None = None) -> None:
    """Run one case against our operator and its golden; raise ``NotRun`` for a case that
    cannot run here, ``AssertionError`` for a wrong result; an ``AclError`` from our
    operator propagates (a case CANN runs that we refuse is a failure)."""
    import openacl
    import openacl.ops
    from openacl.ops import REGISTRY

    goldens = GOLDENS if goldens is None else goldens
    if case.op not in REGISTRY:
        raise NotRun(f"aclnn{case.op} is not implemented")
    entry = goldens.get(case.op)
    if entry is None:
        raise NotRun(f"aclnn{case.op} has no golden in tests/atk_goldens")
    size = input_bytes(case)
    if size > MAX_CASE_BYTES:
        raise NotRun(f"inputs of {size >> 20} MiB exceed {MAX_CASE_BYTES >> 20} MiB")
    inputs = make_inputs(case)
    _skip(entry, inputs)  # on the inputs as the case writes them
    op = REGISTRY[case.op]
    names = entry.params or tuple(p.name for p in op.inputs)
    if len(inputs) > len(names):
        raise AssertionError(f"the case has {len(inputs)} inputs; aclnn{case.op} takes "
                             f"{len(names)} ({', '.join(names)}): give the golden params=")
    inputs = _fit_attributes(case, op, names, inputs)
    _skip(entry, inputs)  # and on the values as bound (an attribute's range drawn)
    if entry.prepare is not None:
        inputs = entry.prepare(inputs)
    written = {p.name for p in op.outputs} - {p.name for p in op.inputs}
    typed = [_typed_scalar(value, dtype) for value, dtype in
             zip(inputs, scalar_dtypes(case) + [None] * len(inputs), strict=False)]
    arguments = {name: _device(value) for name, value in  # later arguments keep their defaults
                 zip(names, typed, strict=False)
                 if name not in written and not name.startswith(GOLDEN_ONLY)}
    kinds = {p.name: p for p in op.params}
    missing = [name for name, value in arguments.items() if value is None and
               name in kinds and kinds[name].is_tensor and not kinds[name].optional]
    if missing:  # a required tensor given as "null": CANN's case expects the null error
        _expect_null_error(op, arguments, missing)
        return
    try:
        # a stream of the case's own: a kernel that fails poisons its stream for good (as on
        # a device), and the next case must not inherit that
        with openacl.Stream():
            result = getattr(openacl.ops, op.snake_name)(**arguments)
            ours = [np.asarray(r.numpy()) for r in _flat(result)]
    finally:
        for value in arguments.values():
            _free(value)
    if entry.check is not None:
        entry.check(ours, inputs)
        return
    widened = [_to_torch(v) for v in inputs]
    expected = entry.fn(_dtypes_of(inputs), *widened) if entry.with_dtypes else entry.fn(
        *widened)
    expected = _flat(expected)
    if len(expected) > len(ours):
        raise AssertionError(f"the golden gives {len(expected)} outputs; aclnn{case.op} "
                             f"returned {len(ours)}")
    working: list[Any] = []

    def benchmark(index: int) -> np.ndarray | None:
        """Output ``index`` of the golden run at working precision (float32: what a
        float32 kernel elsewhere computes), the double benchmark's second benchmark; None
        where the golden cannot run so."""
        if not working:
            narrow = [_to_torch(v, working=True) for v in inputs]
            try:
                values = entry.fn(_dtypes_of(inputs), *narrow) if entry.with_dtypes else \
                    entry.fn(*narrow)
                working.append(_flat(values))
            except Exception:  # a golden written for float64 only
                working.append(None)
        values = working[0]
        if values is None or index >= len(values) or values[index] is None:
            return None
        return _to_numpy(values[index])

    for index, (mine, theirs) in enumerate(zip(ours, expected, strict=False)):  # a prefix
        if theirs is None:
            continue  # an output the golden does not check (documented there)
        _compare(mine, _to_numpy(theirs), entry.standard or case.standard,
                 f"aclnn{case.op} case {case.data.get('id', case.index)} output {index}",
                 lambda index=index: benchmark(index))


@dataclass
class Tally:
    """Counts of one suite's cases."""

    run: int = 0
    passed: int = 0
    not_run: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def run_suite(cases: Iterable[Case], goldens: dict[str, Golden] | None = None,
              keep: int = 5) -> Tally:
    """Run ``cases``; count what passed, what failed (the first ``keep`` messages kept)
    and why cases did not run."""
    tally = Tally()
    for case in cases:
        try:
            run_case(case, goldens)
        except NotRun as reason:
            tally.not_run[str(reason)] = tally.not_run.get(str(reason), 0) + 1
            continue
        except Exception as exc:  # a wrong result, a refusal, or a golden or kernel crash
            tally.run += 1
            if len(tally.failures) < keep:
                tally.failures.append(f"case {case.data.get('id', case.index)} "
                                      f"({_summary(case)}): {type(exc).__name__}: {exc}")
            continue
        tally.run += 1
        tally.passed += 1
    return tally


def _summary(case: Case) -> str:
    """A case's inputs in a few words (dtypes and shapes) for a failure message."""
    parts = []
    for entry in case.data["inputs"]:
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, dict) and item.get("type") in ("tensor", "tensors",
                                                                "tensor_tuple"):
                parts.append(f"{item.get('dtype')}{item.get('shape')}")
            elif isinstance(item, dict) and not _is_non_param(item):
                parts.append(repr(item.get("range_values")))
    return ", ".join(parts)


def by_suite(cases: Iterable[Case]) -> Iterator[tuple[str, list[Case]]]:
    """Cases grouped by ATK file stem, in name order."""
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(case.key, []).append(case)
    for key in sorted(groups):
        yield key, groups[key]
