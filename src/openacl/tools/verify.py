"""CANN's precision standards: compare an operator's output with its golden.

Each standard is one function taking ``(actual, golden, dtype=None)`` and returning a
:class:`VerifyReport`; :func:`verify` picks one by name. ``dtype`` is the operator's output
data type and selects the thresholds (default: ``actual``'s dtype); values are compared in
float64 (complex128), so a golden computed in higher precision is compared as it is.

Rules every standard shares:

* Integer and bool outputs are compared exactly, whatever the standard.
* NaN and +-inf must appear in the same places with the same sign (a NaN matches any NaN).
  A NaN/inf that does not match fails the comparison outright; it is also listed and
  counted as a mismatch. Matching special values take no part in the error metrics.
* MERE / MARE in every report are CANN's ``avg|max(|actual - golden| / (|golden| + 1e-7))``
  over the finite elements (single_benchmark: over the elements outside the small-value
  range, which it judges by absolute error).

The standards, their thresholds and where they come from:

``ratio``
    The AscendC samples' ``scripts/verify_result.py`` (AclNNInvocation, KernelLaunch):
    ``np.isclose(output, golden, rtol, atol, equal_nan=True)`` per element, and the run
    passes when ``mismatches / size <= error_tol``. float16 (the AddCustom samples):
    rtol 1e-3, atol 1e-5, error_tol 1e-3. float32 (the Matmul samples, "# for float32"):
    rtol 1e-6, atol 1e-9, error_tol 1e-4. The samples define no other float type.
``double_thousandth``
    The "double thousandth" (双千分之一) rule of the samples that compare with
    ``loss = 1e-3`` ("fp16 requires absolute and relative error within one thousandth"):
    an element passes if ``|a - g| <= 1e-3`` or ``|a - g| / (max(|a|, |g|) + 1e-9) <= 1e-3``;
    at most 0.1 % of the elements may fail. (Those samples fail a run only when both the
    absolute and the relative failures exceed 0.1 %; here an element fails only when it
    fails both, which is the per-element form of the same rule.)
``mixed``
    CANN's ecosystem operator standard (生态算子开源精度标准, mixed tolerance; hicann/opbase
    ``docs/zh/ops_precision_standard/experimental_standard.md`` §2): an element passes if
    ``|a - g| <= atol + rtol * |g|``; the case passes if ``matched_ratio >= 0.99`` and
    ``max_abs_error <= max_abs_error_limit``. float16 rtol = atol = 2^-9; bfloat16
    rtol = atol = 2^-6; float32 rtol 2^-10, atol 2^-16. ``max_abs_error_limit`` is
    ``max(floor, 32 * ULP(g_low))`` with floor 1e-1 (float16), 1e0 (bfloat16), 1e-2
    (float32), ``g_low`` the golden at the largest finite absolute error narrowed to the
    output dtype (cann/opbase PR 924). float64 uses the float32 row.
``single_benchmark``
    CANN's single-benchmark MERE/MARE standard (same repository, the MERE/MARE revision of
    ``experimental_standard.md``): pass when ``MERE < T`` and ``MARE < 10 * T`` with
    T = 2^-10 (float16), 2^-7 (bfloat16), 2^-13 (float32; float64 and complex use it too).
    Small values follow CANN's commercial standard §4.5.3 (小值域): an element whose
    ``|golden| < small_value_threshold`` (2^-11, 2^-8, 2^-14) is left out of MERE/MARE and
    is an error when ``|a - g| > small_value_error`` (2^-16, 2^-16, 2^-30). That standard
    allows the NPU twice the error count of a second benchmark, ``max(count, 1)``; with the
    golden as the only benchmark (count 0) at most 2 small-value errors pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from openacl._api import module_dir
from openacl.tools.datagen import dtype_from_name

MISMATCHES_KEPT = 100  # mismatches a report keeps (the samples print the first ~100)
MISMATCHES_SHOWN = 10  # mismatches format() prints by default
RELATIVE_EPSILON = 1e-7  # CANN's MERE/MARE denominator term |golden| + 1e-7

FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
COMPLEX64 = np.dtype(np.complex64)
COMPLEX128 = np.dtype(np.complex128)


# -- thresholds --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RatioTolerance:
    """The samples' ratio rule: per-element ``isclose(rtol, atol)``, mismatches <= error_tol."""

    rtol: float
    atol: float
    error_tol: float  # largest passing fraction of mismatched elements


RATIO = {
    FLOAT16: RatioTolerance(rtol=1e-3, atol=1e-5, error_tol=1e-3),  # AddCustom samples
    FLOAT32: RatioTolerance(rtol=1e-6, atol=1e-9, error_tol=1e-4),  # Matmul samples
}

DOUBLE_THOUSANDTH_LOSS = 1e-3  # absolute and relative error bound, and failing fraction
DOUBLE_THOUSANDTH_MINIMUM = 1e-9  # the samples' denominator guard (10e-10)


@dataclass(frozen=True)
class MixedTolerance:
    """The ecosystem standard's mixed tolerance for one output dtype."""

    rtol: float
    atol: float
    max_abs_error_floor: float  # the table's "1e-X" in "1e-X or 32 * ULP"
    mantissa_bits: int  # for ULP
    min_exponent: int  # exponent of the smallest normal number, for ULP of subnormals
    required_matched_ratio: float = 0.99
    ulp_multiple: int = 32  # max_abs_error_limit's "32 * ULP"

    def ulp(self, value: float) -> float:
        """ULP of ``value`` in this dtype (spacing at ``|value|``; subnormal spacing at 0)."""
        magnitude = abs(float(value))
        exponent = self.min_exponent
        if magnitude > 0 and np.isfinite(magnitude):
            exponent = max(int(np.floor(np.log2(magnitude))), self.min_exponent)
        return 2.0 ** (exponent - self.mantissa_bits)

    def max_abs_error_limit(self, golden_low: float) -> float:
        return max(self.max_abs_error_floor, self.ulp_multiple * self.ulp(golden_low))


MIXED = {
    FLOAT16: MixedTolerance(2.0 ** -9, 2.0 ** -9, 1e-1, mantissa_bits=10, min_exponent=-14),
    BFLOAT16: MixedTolerance(2.0 ** -6, 2.0 ** -6, 1e0, mantissa_bits=7, min_exponent=-126),
    FLOAT32: MixedTolerance(2.0 ** -10, 2.0 ** -16, 1e-2, mantissa_bits=23, min_exponent=-126),
}


@dataclass(frozen=True)
class SingleBenchmarkThreshold:
    """CANN's single-benchmark standard for one output dtype."""

    threshold: float  # MERE < threshold, MARE < mare_multiple * threshold
    small_value_threshold: float  # |golden| below this is judged by absolute error
    small_value_error: float  # ... and is an error when |actual - golden| exceeds this
    mare_multiple: int = 10
    small_value_errors_allowed: int = 2  # 2 * max(benchmark count 0, 1)

    @property
    def mare_threshold(self) -> float:
        return self.mare_multiple * self.threshold


SINGLE_BENCHMARK = {
    FLOAT16: SingleBenchmarkThreshold(2.0 ** -10, 2.0 ** -11, 2.0 ** -16),
    BFLOAT16: SingleBenchmarkThreshold(2.0 ** -7, 2.0 ** -8, 2.0 ** -16),
    FLOAT32: SingleBenchmarkThreshold(2.0 ** -13, 2.0 ** -14, 2.0 ** -30),
}
_FALLBACK = {FLOAT64: FLOAT32, COMPLEX64: FLOAT32, COMPLEX128: FLOAT32}


def _row(table: dict[np.dtype, Any], dtype: np.dtype, standard: str) -> Any:
    row = table.get(dtype) or table.get(_FALLBACK.get(dtype))
    if row is None:
        names = ", ".join(str(d) for d in table)
        raise ValueError(f"standard '{standard}' defines no thresholds for {dtype} "
                         f"(it has {names}; integers and bool are always exact)")
    return row


# -- the report --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mismatch:
    """One element that failed: its (multi-dimensional) index, the values, the relative
    difference ``|actual - expected| / |expected|`` (inf where expected is 0)."""

    index: tuple[int, ...]
    expected: Any
    actual: Any
    rdiff: float


@dataclass(frozen=True)
class VerifyReport:
    """What a comparison found. ``format()`` prints it the way CANN's scripts do."""

    passed: bool
    standard: str
    dtype: str
    total: int  # elements compared
    mismatch_count: int  # elements that failed the per-element rule (NaN/inf included)
    error_ratio: float  # mismatch_count / total
    mere: float
    mare: float
    max_abs_error: float
    max_rel_error: float
    mismatches: tuple[Mismatch, ...]  # the first MISMATCHES_KEPT, in index order
    special_mismatches: int = 0  # NaN/inf not matched in place and sign
    small_value_count: int = 0  # single_benchmark: elements in the small-value range
    small_value_errors: int = 0
    limits: tuple[tuple[str, float], ...] = ()  # (metric, limit) the standard applied
    reasons: tuple[str, ...] = ()  # why it failed

    def format(self, limit: int = MISMATCHES_SHOWN) -> str:
        lines = [f"standard: {self.standard}, dtype: {self.dtype}, elements: {self.total}, "
                 f"mismatches: {self.mismatch_count}"]
        for item in self.mismatches[:limit]:
            index = ", ".join(str(i) for i in item.index)
            lines.append(f"data index: ({index}), expected: {_number(item.expected)}, "
                         f"actual: {_number(item.actual)}, rdiff: {item.rdiff:-.6f}")
        hidden = self.mismatch_count - min(limit, len(self.mismatches))
        if hidden > 0:
            lines.append(f"... {hidden} more mismatch(es)")
        tolerance = dict(self.limits).get("error ratio")
        lines.append(f"error ratio: {self.error_ratio:.4f}" +
                     (f", tolerance: {tolerance:.4f}" if tolerance is not None else ""))
        lines.append(f"MERE: {self.mere:.6g}, MARE: {self.mare:.6g}, max abs error: "
                     f"{self.max_abs_error:.6g}, max rel error: {self.max_rel_error:.6g}")
        if self.small_value_count:
            lines.append(f"small values: {self.small_value_count}, small-value errors: "
                         f"{self.small_value_errors}")
        if self.special_mismatches:
            lines.append(f"NaN/inf mismatches: {self.special_mismatches}")
        if self.limits:
            lines.append("limits: " + ", ".join(f"{name} {_limit(name, value)}"
                                                for name, value in self.limits))
        lines.append("test pass" if self.passed else
                     "[ERROR] result error: " + "; ".join(self.reasons))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _number(value: Any) -> str:
    if isinstance(value, (complex, np.complexfloating)):
        return f"{complex(value)}"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):-.9f}"


def _limit(name: str, value: float) -> str:
    comparison = {"MERE": "<", "MARE": "<", "matched ratio": ">=", "rtol": "=",
                  "atol": "="}.get(name, "<=")
    return f"{comparison} {value:.6g}"


# -- shared mechanics --------------------------------------------------------------------------
@dataclass
class _Pair:
    """actual and golden as wide arrays, with the special-value bookkeeping done."""

    dtype: np.dtype
    shape: tuple[int, ...]
    actual: np.ndarray  # flat, float64 / complex128 / original int dtype
    golden: np.ndarray
    finite: np.ndarray  # both finite: compared by the standard's numeric rule
    special_bad: np.ndarray  # a NaN/inf that does not match in place and sign

    @property
    def abs_error(self) -> np.ndarray:
        return np.abs(self.actual[self.finite] - self.golden[self.finite])

    def relative(self, where: np.ndarray | None = None) -> np.ndarray:
        """CANN's |a - g| / (|g| + 1e-7) over the finite elements (and ``where``)."""
        mask = self.finite if where is None else self.finite & where
        return (np.abs(self.actual[mask] - self.golden[mask])
                / (np.abs(self.golden[mask]) + RELATIVE_EPSILON))


def _resolve_dtype(dtype: Any, actual: np.ndarray) -> np.dtype:
    return actual.dtype if dtype is None else dtype_from_name(dtype)


def _prepare(actual: Any, golden: Any, dtype: Any) -> _Pair:
    actual, golden = np.asarray(actual), np.asarray(golden)
    if actual.shape != golden.shape:
        if actual.size != golden.size:
            raise ValueError(f"actual has {actual.size} elements {list(actual.shape)}, golden "
                             f"has {golden.size} {list(golden.shape)}")
        if actual.ndim <= 1:
            actual = actual.reshape(golden.shape)
        else:
            golden = golden.reshape(actual.shape)
    out_dtype = _resolve_dtype(dtype, actual)
    shape = actual.shape
    if _is_exact(out_dtype):
        a, g = actual.reshape(-1), golden.reshape(-1)
        ones = np.ones(a.shape, bool)
        return _Pair(out_dtype, shape, a, g, ones, ~ones)
    wide = np.complex128 if out_dtype.kind == "c" or "c" in (actual.dtype.kind,
                                                             golden.dtype.kind) else np.float64
    a = actual.astype(np.float32).astype(wide) if actual.dtype == BFLOAT16 else \
        actual.astype(wide)
    g = golden.astype(np.float32).astype(wide) if golden.dtype == BFLOAT16 else \
        golden.astype(wide)
    a, g = a.reshape(-1), g.reshape(-1)
    finite = np.isfinite(a) & np.isfinite(g)
    return _Pair(out_dtype, shape, a, g, finite, ~finite & ~_same_special(a, g))


def _same_special(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Where a and g agree as special values: both NaN, or the same signed inf (per part for
    complex numbers)."""
    if a.dtype.kind == "c":
        return _same_special(a.real, g.real) & _same_special(a.imag, g.imag) | \
            (np.isnan(a) & np.isnan(g))
    both_nan = np.isnan(a) & np.isnan(g)
    same_inf = np.isinf(g) & (a == g)
    finite_parts = np.isfinite(a) & np.isfinite(g)
    return both_nan | same_inf | finite_parts


def _is_exact(dtype: np.dtype) -> bool:
    return dtype.kind in "biu"


def _rdiff(actual: Any, expected: Any) -> float:
    difference = abs(complex(actual) - complex(expected)) if np.iscomplexobj(actual) else \
        abs(float(actual) - float(expected))
    scale = abs(complex(expected)) if np.iscomplexobj(expected) else abs(float(expected))
    if np.isnan(difference):
        return float("nan")
    if scale == 0:
        return 0.0 if difference == 0 else float("inf")
    return difference / scale


def _report(pair: _Pair, standard: str, bad_finite: np.ndarray, limits: dict[str, float],
            failures: list[str], mere: float | None = None, mare: float | None = None,
            small: tuple[int, int] = (0, 0)) -> VerifyReport:
    """Build the report: ``bad_finite`` marks the failing elements among the finite ones
    (flat, full length); NaN/inf mismatches are added here."""
    total = pair.actual.size
    bad = bad_finite & pair.finite | pair.special_bad
    special = int(pair.special_bad.sum())
    if special:
        failures = [*failures, f"NaN/inf differ in place or sign at {special} element(s)"]
    flat_bad = np.flatnonzero(bad)
    mismatches = tuple(
        Mismatch(tuple(int(i) for i in np.unravel_index(int(k), pair.shape)) if pair.shape
                 else (), _item(pair.golden[k], pair.dtype), _item(pair.actual[k], pair.dtype),
                 _rdiff(pair.actual[k], pair.golden[k]))
        for k in flat_bad[:MISMATCHES_KEPT])
    if _is_exact(pair.dtype) or not pair.finite.any():
        abs_error = rel_error = np.zeros(0)
    else:
        abs_error, rel_error = pair.abs_error, pair.relative()
    max_abs = float(abs_error.max()) if abs_error.size else 0.0
    max_rel = float(rel_error.max()) if rel_error.size else 0.0
    if mere is None:
        mere = float(rel_error.mean()) if rel_error.size else 0.0
    if mare is None:
        mare = max_rel
    return VerifyReport(
        passed=not failures, standard=standard, dtype=str(pair.dtype), total=int(total),
        mismatch_count=int(flat_bad.size), error_ratio=flat_bad.size / total if total else 0.0,
        mere=mere, mare=mare, max_abs_error=max_abs, max_rel_error=max_rel,
        mismatches=mismatches, special_mismatches=special, small_value_count=small[0],
        small_value_errors=small[1], limits=tuple(limits.items()), reasons=tuple(failures))


def _item(value: Any, dtype: np.dtype) -> Any:
    if _is_exact(dtype):
        return value.item()
    return complex(value) if np.iscomplexobj(value) else float(value)


def _ratio_failure(bad: int, total: int, allowed: float) -> list[str]:
    ratio = bad / total if total else 0.0
    if ratio <= allowed:
        return []
    return [f"error ratio {ratio:.4f} > tolerance {allowed:.4f} ({bad} of {total} elements)"]


# -- the standards -----------------------------------------------------------------------------
def exact(actual: Any, golden: Any, dtype: Any = None, standard: str = "exact"
          ) -> VerifyReport:
    """Bit-for-value equality: what every standard applies to integers and bool."""
    pair = _prepare(actual, golden, dtype)
    bad = pair.actual != pair.golden
    if not _is_exact(pair.dtype):
        bad = pair.finite & bad
    count = int((bad | pair.special_bad).sum())
    failures = [f"{count} of {pair.actual.size} element(s) differ"] if bad.any() else []
    return _report(pair, standard, bad, {"mismatches": 0}, failures)


def ratio(actual: Any, golden: Any, dtype: Any = None) -> VerifyReport:
    """The samples' rule: ``np.isclose(rtol, atol)`` per element, at most ``error_tol`` of the
    elements may mismatch (float16 1e-3 / 1e-5 / 0.1 %; float32 1e-6 / 1e-9 / 0.01 %)."""
    pair = _prepare(actual, golden, dtype)
    if _is_exact(pair.dtype):
        return exact(actual, golden, dtype, "ratio")
    rule = _row(RATIO, pair.dtype, "ratio")
    bad = np.zeros(pair.actual.size, bool)
    bad[pair.finite] = pair.abs_error > rule.atol + rule.rtol * np.abs(pair.golden[pair.finite])
    count = int((bad | pair.special_bad).sum())
    failures = _ratio_failure(count, pair.actual.size, rule.error_tol)
    return _report(pair, "ratio", bad, {"rtol": rule.rtol, "atol": rule.atol,
                                        "error ratio": rule.error_tol}, failures)


def double_thousandth(actual: Any, golden: Any, dtype: Any = None) -> VerifyReport:
    """双千分之一: an element passes if its absolute or its relative error is <= 1e-3
    (relative to ``max(|actual|, |golden|)``); at most 0.1 % of the elements may fail."""
    pair = _prepare(actual, golden, dtype)
    if _is_exact(pair.dtype):
        return exact(actual, golden, dtype, "double_thousandth")
    a, g = pair.actual[pair.finite], pair.golden[pair.finite]
    error = np.abs(a - g)
    relative = error / (np.maximum(np.abs(a), np.abs(g)) + DOUBLE_THOUSANDTH_MINIMUM)
    bad = np.zeros(pair.actual.size, bool)
    bad[pair.finite] = (error > DOUBLE_THOUSANDTH_LOSS) & (relative > DOUBLE_THOUSANDTH_LOSS)
    count = int((bad | pair.special_bad).sum())
    failures = _ratio_failure(count, pair.actual.size, DOUBLE_THOUSANDTH_LOSS)
    return _report(pair, "double_thousandth", bad,
                   {"abs error": DOUBLE_THOUSANDTH_LOSS, "rel error": DOUBLE_THOUSANDTH_LOSS,
                    "error ratio": DOUBLE_THOUSANDTH_LOSS}, failures)


def mixed(actual: Any, golden: Any, dtype: Any = None) -> VerifyReport:
    """The ecosystem mixed tolerance: ``|a - g| <= atol + rtol * |g|`` for >= 99 % of the
    elements, and the largest finite absolute error within ``max(floor, 32 * ULP(g_low))``."""
    pair = _prepare(actual, golden, dtype)
    if _is_exact(pair.dtype):
        return exact(actual, golden, dtype, "mixed")
    rule = _row(MIXED, pair.dtype, "mixed")
    error = pair.abs_error
    bad = np.zeros(pair.actual.size, bool)
    bad[pair.finite] = error > rule.atol + rule.rtol * np.abs(pair.golden[pair.finite])
    total = pair.actual.size
    count = int((bad | pair.special_bad).sum())
    matched_ratio = (total - count) / total if total else 1.0
    limit = rule.max_abs_error_floor
    failures = []
    if matched_ratio < rule.required_matched_ratio:
        failures.append(f"matched ratio {matched_ratio:.4f} < {rule.required_matched_ratio}")
    if error.size:
        worst = int(np.argmax(error))
        narrowed = _narrow(pair.golden[pair.finite][worst], pair.dtype)
        limit = rule.max_abs_error_limit(narrowed)
        if error[worst] > limit:
            failures.append(f"max abs error {error[worst]:.6g} > limit {limit:.6g}")
    return _report(pair, "mixed", bad,
                   {"rtol": rule.rtol, "atol": rule.atol,
                    "matched ratio": rule.required_matched_ratio,
                    "error ratio": 1 - rule.required_matched_ratio,
                    "max abs error": limit}, failures)


def _narrow(value: Any, dtype: np.dtype) -> float:
    """``value`` rounded to the output dtype (the standard's g_low), as a float."""
    value = abs(complex(value)) if np.iscomplexobj(value) else float(value)
    target = dtype if dtype.kind == "f" else FLOAT32
    with np.errstate(over="ignore"):
        return float(np.asarray(value, np.float32 if target == BFLOAT16 else target)
                     .astype(target).astype(np.float64))


@dataclass(frozen=True)
class _Errors:
    """The single-benchmark metrics of one pair."""

    mere: float
    mare: float
    rmse: float  # over the finite elements
    small: int  # elements with |golden| < the small-value threshold
    small_errors: int  # of those, how many are off by more than the small-value error
    bad: np.ndarray  # flat: relative error >= threshold, or a small-value error


def _errors(pair: _Pair, rule: SingleBenchmarkThreshold) -> _Errors:
    magnitude = np.abs(pair.golden)
    small = pair.finite & (magnitude < rule.small_value_threshold)
    normal = pair.finite & ~small
    relative = pair.relative(~small)
    bad = np.zeros(pair.actual.size, bool)
    bad[normal] = relative >= rule.threshold
    small_errors = np.abs(pair.actual[small] - pair.golden[small]) > rule.small_value_error
    bad[small] = small_errors
    error = pair.abs_error
    return _Errors(float(relative.mean()) if relative.size else 0.0,
                   float(relative.max()) if relative.size else 0.0,
                   float(np.sqrt(np.mean(np.square(error)))) if error.size else 0.0,
                   int(small.sum()), int(small_errors.sum()), bad)


def single_benchmark(actual: Any, golden: Any, dtype: Any = None) -> VerifyReport:
    """CANN's single-benchmark standard: ``MERE < T``, ``MARE < 10 T`` over the elements with
    ``|golden| >= small_value_threshold``; at most 2 small-value elements with
    ``|a - g| > small_value_error``. Listed mismatches: relative error >= T, or a
    small-value error."""
    pair = _prepare(actual, golden, dtype)
    if _is_exact(pair.dtype):
        return exact(actual, golden, dtype, "single_benchmark")
    rule = _row(SINGLE_BENCHMARK, pair.dtype, "single_benchmark")
    found = _errors(pair, rule)
    failures = []
    if not found.mere < rule.threshold:
        failures.append(f"MERE {found.mere:.6g} >= {rule.threshold:.6g}")
    if not found.mare < rule.mare_threshold:
        failures.append(f"MARE {found.mare:.6g} >= {rule.mare_threshold:.6g}")
    if found.small_errors > rule.small_value_errors_allowed:
        failures.append(f"{found.small_errors} small-value error(s) (|golden| < "
                        f"{rule.small_value_threshold:.6g} and |a - g| > "
                        f"{rule.small_value_error:.6g}) > {rule.small_value_errors_allowed}")
    return _report(pair, "single_benchmark", found.bad,
                   {"MERE": rule.threshold, "MARE": rule.mare_threshold,
                    "small-value errors": rule.small_value_errors_allowed},
                   failures, mere=found.mere, mare=found.mare,
                   small=(found.small, found.small_errors))


DOUBLE_BENCHMARK_LIMITS = {"MERE": 2.0, "MARE": 10.0, "RMSE": 2.0, "small-value errors": 2.0}


def double_benchmark(actual: Any, golden: Any, benchmark: Any, dtype: Any = None
                     ) -> VerifyReport:
    """CANN's double-benchmark standard (level L0): our errors against the high-precision
    ``golden`` set beside those of ``benchmark``, a second implementation at working
    precision (CANN's third-party chip): MERE and RMSE at most 2x the benchmark's, MARE
    10x, the small-value error count 2x. It tells what a float32 computation cannot avoid
    (a sum that cancels to a small value) from a bug, as the single benchmark cannot; a
    metric that meets the single-benchmark limit by itself passes too."""
    pair = _prepare(actual, golden, dtype)
    if _is_exact(pair.dtype):
        return exact(actual, golden, dtype, "double_benchmark")
    rule = _row(SINGLE_BENCHMARK, pair.dtype, "double_benchmark")
    ours = _errors(pair, rule)
    theirs = _errors(_prepare(benchmark, golden, pair.dtype), rule)
    checks = (("MERE", ours.mere, theirs.mere, ours.mere < rule.threshold),
              ("MARE", ours.mare, theirs.mare, ours.mare < rule.mare_threshold),
              ("RMSE", ours.rmse, theirs.rmse, False),
              ("small-value errors", ours.small_errors, theirs.small_errors,
               ours.small_errors <= rule.small_value_errors_allowed))
    failures = [f"{name} {mine:.6g} > {DOUBLE_BENCHMARK_LIMITS[name]:g} x the benchmark's "
                f"{reference:.6g}" for name, mine, reference, alone in checks
                if not (alone or mine <= DOUBLE_BENCHMARK_LIMITS[name] * reference)]
    return _report(pair, "double_benchmark", ours.bad,
                   {f"{name} ratio": limit for name, limit in DOUBLE_BENCHMARK_LIMITS.items()},
                   failures, mere=ours.mere, mare=ours.mare,
                   small=(ours.small, ours.small_errors))


STANDARDS: dict[str, Callable[..., VerifyReport]] = {
    "single_benchmark": single_benchmark,
    "double_thousandth": double_thousandth,
    "ratio": ratio,
    "mixed": mixed,
    "exact": exact,
}


def verify(actual: Any, golden: Any, dtype: Any = None, standard: str = "single_benchmark"
           ) -> VerifyReport:
    """Compare ``actual`` with ``golden`` under ``standard`` (a name in ``STANDARDS``) for
    output ``dtype`` (default: ``actual``'s dtype).

    Raises:
        ValueError: an unknown standard, sizes that differ, or a dtype the standard has no
            thresholds for.
    """
    try:
        rule = STANDARDS[standard]
    except KeyError:
        raise ValueError(f"unknown standard {standard!r}; expected one of "
                         f"{', '.join(STANDARDS)}") from None
    return rule(actual, golden, dtype)


__all__ = ["VerifyReport", "Mismatch", "RatioTolerance", "MixedTolerance",
           "SingleBenchmarkThreshold", "RATIO", "MIXED", "SINGLE_BENCHMARK", "STANDARDS",
           "verify", "ratio", "double_thousandth", "mixed", "single_benchmark", "exact",
           "double_benchmark", "DOUBLE_BENCHMARK_LIMITS"]

__dir__ = module_dir(globals())
