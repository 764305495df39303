"""openacl.tools.verify: each CANN precision standard at its boundaries, on crafted arrays.

Values are crafted in float64 and judged with ``dtype=`` naming the output type, so an error
can sit exactly on either side of a threshold.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from openacl.tools import verify as v

BF16 = np.dtype(ml_dtypes.bfloat16)


def with_errors(n: int, errors: dict[int, float], golden: float = 1.0):
    """``n`` goldens of ``golden`` and an actual that is off by ``errors[i]`` at ``i``."""
    g = np.full(n, golden)
    a = g.copy()
    for index, error in errors.items():
        a[index] += error
    return a, g


# -- ratio (the samples' verify_result.py) ---------------------------------------------------
def test_ratio_float16_element_bound():
    bound = 1e-5 + 1e-3 * 1.0  # atol + rtol * |golden|
    a, g = with_errors(4, {0: bound * (1 - 1e-6)})
    assert v.ratio(a, g, "float16").mismatch_count == 0
    a, g = with_errors(4, {0: bound * (1 + 1e-6)})
    report = v.ratio(a, g, "float16")
    assert report.mismatch_count == 1 and not report.passed  # 1 of 4 > 0.1 %


def test_ratio_float16_mismatch_ratio_exactly_at_limit():
    a, g = with_errors(1000, {7: 0.5})  # 1 of 1000 = 0.1 %: allowed
    report = v.ratio(a, g, "float16")
    assert report.passed and report.error_ratio == pytest.approx(1e-3)
    a, g = with_errors(1000, {7: 0.5, 8: 0.5})  # 0.2 %
    assert not v.ratio(a, g, "float16").passed


def test_ratio_float32_thresholds():
    assert v.RATIO[np.dtype(np.float32)] == v.RatioTolerance(1e-6, 1e-9, 1e-4)
    a, g = with_errors(10_000, {0: 1e-3})
    assert v.ratio(a, g, "float32").passed  # 1 of 10000 = 0.01 %
    a, g = with_errors(10_000, {0: 1e-3, 1: 1e-3})
    assert not v.ratio(a, g, "float32").passed
    a, g = with_errors(4, {0: 1e-9 + 1e-6 * 0.99})
    assert v.ratio(a, g, "float32").mismatch_count == 0


def test_ratio_has_no_bfloat16_row():
    with pytest.raises(ValueError, match="no thresholds for bfloat16"):
        v.ratio(np.ones(2), np.ones(2), BF16)


# -- double thousandth -----------------------------------------------------------------------
def test_double_thousandth_absolute_or_relative():
    # large value: absolute 5e-3 fails, relative 5e-3 / 10.005 passes -> element passes
    a, g = with_errors(3, {0: 5e-3}, golden=10.0)
    assert v.double_thousandth(a, g, "float16").mismatch_count == 0
    # small value: relative 9e-4 / 0.1009 fails, absolute 9e-4 passes -> element passes
    a, g = with_errors(3, {0: 9e-4}, golden=0.1)
    assert v.double_thousandth(a, g, "float16").mismatch_count == 0
    # both fail
    a, g = with_errors(3, {0: 0.011}, golden=10.0)
    assert v.double_thousandth(a, g, "float16").mismatch_count == 1


def test_double_thousandth_absolute_boundary():
    a, g = with_errors(2, {0: 1e-3}, golden=0.0)  # |a - g| == 1e-3 passes (<=)
    assert v.double_thousandth(a, g).mismatch_count == 0
    a, g = with_errors(2, {0: 1.0001e-3}, golden=0.0)
    assert v.double_thousandth(a, g).mismatch_count == 1


def test_double_thousandth_fraction_at_limit():
    a, g = with_errors(2000, {1: 1.0, 2: 1.0})  # 2 of 2000 = 0.1 %
    assert v.double_thousandth(a, g).passed
    a, g = with_errors(2000, {1: 1.0, 2: 1.0, 3: 1.0})
    report = v.double_thousandth(a, g)
    assert not report.passed and "error ratio" in report.reasons[0]


# -- mixed (ecosystem) tolerance -------------------------------------------------------------
def test_mixed_thresholds_table():
    f16, bf16, f32 = (v.MIXED[np.dtype(t)] for t in (np.float16, BF16, np.float32))
    assert (f16.rtol, f16.atol, f16.max_abs_error_floor) == (2 ** -9, 2 ** -9, 0.1)
    assert (bf16.rtol, bf16.atol, bf16.max_abs_error_floor) == (2 ** -6, 2 ** -6, 1.0)
    assert (f32.rtol, f32.atol, f32.max_abs_error_floor) == (2 ** -10, 2 ** -16, 1e-2)
    assert f16.required_matched_ratio == 0.99
    assert f16.ulp(1.0) == 2 ** -10 and f16.ulp(1000.0) == 0.5 and f16.ulp(0) == 2 ** -24
    assert f32.ulp(1.0) == 2 ** -23 and bf16.ulp(3.0) == 2 ** -6


def test_mixed_float16_element_bound():
    bound = 2 ** -9 + 2 ** -9 * 1.0
    a, g = with_errors(200, {0: bound})  # <= passes
    assert v.mixed(a, g, "float16").mismatch_count == 0
    a, g = with_errors(200, {0: bound * 1.001})
    assert v.mixed(a, g, "float16").mismatch_count == 1


def test_mixed_matched_ratio_exactly_99_percent():
    a, g = with_errors(100, {0: 0.05})  # 99 of 100 matched
    assert v.mixed(a, g, "float16").passed
    a, g = with_errors(100, {0: 0.05, 1: 0.05})
    report = v.mixed(a, g, "float16")
    assert not report.passed and "matched ratio 0.9800" in report.reasons[0]


def test_mixed_max_abs_error_floor_and_ulp_anchor():
    a, g = with_errors(100, {0: 0.1}, golden=0.0)  # at g = 0: max(0.1, 32 * 2^-24) = 0.1
    assert v.mixed(a, g, "float16").passed
    a, g = with_errors(100, {0: 0.1001}, golden=0.0)
    report = v.mixed(a, g, "float16")
    assert not report.passed and "max abs error" in report.reasons[0]
    # at g = 1000 the ULP is 0.5: the limit grows to 32 * 0.5 = 16
    a, g = with_errors(100, {0: 16.0}, golden=1000.0)
    assert v.mixed(a, g, "float16").passed
    a, g = with_errors(100, {0: 16.5}, golden=1000.0)
    assert not v.mixed(a, g, "float16").passed


def test_mixed_float32_and_bfloat16():
    a, g = with_errors(200, {0: 2 ** -16}, golden=0.0)  # atol alone at 0
    assert v.mixed(a, g, "float32").mismatch_count == 0
    a, g = with_errors(200, {0: 2 ** -15}, golden=0.0)
    assert v.mixed(a, g, "float32").mismatch_count == 1
    golden = np.linspace(1, 2, 64).astype(BF16)
    actual = (golden.astype(np.float32) * (1 + 2 ** -7)).astype(BF16)  # 1 bf16 ULP off
    assert v.mixed(actual, golden).passed and v.mixed(actual, golden).dtype == "bfloat16"


# -- single benchmark (MERE / MARE with small values) ---------------------------------------
@pytest.mark.parametrize("dtype, threshold", [("float16", 2 ** -10), (BF16, 2 ** -7),
                                              ("float32", 2 ** -13)])
def test_single_benchmark_mere_boundary(dtype, threshold):
    n = 50
    a, g = with_errors(n, {i: threshold * (1 - 1e-3) for i in range(n)})
    report = v.single_benchmark(a, g, dtype)
    assert report.passed and report.mere < threshold
    a, g = with_errors(n, {i: threshold * (1 + 1e-3) for i in range(n)})
    report = v.single_benchmark(a, g, dtype)
    assert not report.passed and report.reasons[0].startswith("MERE")


@pytest.mark.parametrize("dtype, threshold", [("float16", 2 ** -10), (BF16, 2 ** -7),
                                              ("float32", 2 ** -13)])
def test_single_benchmark_mare_boundary(dtype, threshold):
    a, g = with_errors(1000, {3: 9.99 * threshold})
    assert v.single_benchmark(a, g, dtype).passed
    a, g = with_errors(1000, {3: 10.01 * threshold})
    report = v.single_benchmark(a, g, dtype)
    assert not report.passed and report.reasons == (
        f"MARE {report.mare:.6g} >= {10 * threshold:.6g}",)
    assert report.mismatches[0].index == (3,)


@pytest.mark.parametrize("dtype, small, error", [("float16", 2 ** -11, 2 ** -16),
                                                 (BF16, 2 ** -8, 2 ** -16),
                                                 ("float32", 2 ** -14, 2 ** -30)])
def test_single_benchmark_small_values(dtype, small, error):
    g = np.concatenate([np.full(10, small / 2), np.ones(10)])
    a = g.copy()
    a[:10] += error  # exactly the error bound: not an error; relative error 2^-4 or so
    report = v.single_benchmark(a, g, dtype)
    assert report.passed and report.small_value_count == 10 and report.mere == 0
    a[:2] += error  # two small-value errors are allowed
    assert v.single_benchmark(a, g, dtype).small_value_errors == 2
    assert v.single_benchmark(a, g, dtype).passed
    a[2] += error
    report = v.single_benchmark(a, g, dtype)
    assert not report.passed and report.small_value_errors == 3
    assert "small-value error" in report.reasons[0]


def test_single_benchmark_threshold_value_is_not_small():
    g = np.array([2 ** -11, 1.0])  # |golden| == threshold: judged by relative error
    a = g * (1 + 2 ** -9)
    report = v.single_benchmark(a, g, "float16")
    assert report.small_value_count == 0 and not report.passed


# -- special values and integers -------------------------------------------------------------
@pytest.mark.parametrize("standard", ["single_benchmark", "double_thousandth", "ratio",
                                      "mixed"])
def test_nan_inf_must_match_in_place_and_sign(standard):
    g = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    assert v.verify(g.copy(), g, standard=standard).passed
    wrong_sign = g.copy()
    wrong_sign[2] = -np.inf
    report = v.verify(wrong_sign, g, standard=standard)
    assert not report.passed and report.special_mismatches == 1
    assert report.mismatches[0].index == (2,) and "NaN/inf" in report.reasons[-1]
    moved = g.copy()
    moved[[0, 1]] = moved[[1, 0]]  # the NaN one place off
    assert v.verify(moved, g, standard=standard).special_mismatches == 2


@pytest.mark.parametrize("standard", list(v.STANDARDS))
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.int64, np.bool_])
def test_integers_and_bool_exact(standard, dtype):
    g = (np.arange(12).reshape(3, 4) % 2).astype(dtype)
    assert v.verify(g.copy(), g, standard=standard).passed
    a = g.copy()
    a[1, 2] = not a[1, 2] if dtype is np.bool_ else a[1, 2] + 1
    report = v.verify(a, g, standard=standard)
    assert not report.passed and report.mismatch_count == 1
    assert report.mismatches[0].index == (1, 2)


# -- the report and dispatch -----------------------------------------------------------------
def test_report_contents_and_format():
    g = np.ones((4, 5), np.float16)
    a = g.copy()
    a[2, 3] = 1.5
    report = v.verify(a, g, "float16", "ratio")
    assert (report.total, report.mismatch_count, report.standard) == (20, 1, "ratio")
    first = report.mismatches[0]
    assert first.index == (2, 3) and (first.expected, first.actual) == (1.0, 1.5)
    assert first.rdiff == pytest.approx(0.5) and report.max_abs_error == 0.5
    assert report.error_ratio == pytest.approx(0.05)
    text = report.format()
    assert "data index: (2, 3), expected: 1.000000000, actual: 1.500000000, rdiff: 0.500000" \
        in text
    assert "error ratio: 0.0500, tolerance: 0.0010" in text and "MERE" in text
    assert text.splitlines()[-1].startswith("[ERROR] result error")
    assert v.verify(g, g, standard="ratio").format().splitlines()[-1] == "test pass"


def test_report_keeps_first_mismatches_in_order():
    g = np.ones(500)
    report = v.single_benchmark(g * 2, g, "float32")
    assert report.mismatch_count == 500 and len(report.mismatches) == v.MISMATCHES_KEPT
    assert [m.index[0] for m in report.mismatches[:3]] == [0, 1, 2]
    assert "... 497 more mismatch(es)" in report.format(limit=3)


def test_verify_dispatch_and_errors():
    g = np.ones((2, 3), np.float32)
    assert v.verify(g.reshape(-1), g).passed  # a flat output takes the golden's shape
    with pytest.raises(ValueError, match="unknown standard"):
        v.verify(g, g, standard="loose")
    with pytest.raises(ValueError, match="golden has 6"):
        v.verify(np.ones(5), g)
    with pytest.raises(ValueError, match="unknown data type"):
        v.verify(g, g, dtype="float17")
    empty = np.zeros((0, 3), np.float16)
    assert v.verify(empty, empty).passed and v.verify(empty, empty).total == 0


def test_float32_golden_of_float16_output():
    golden = np.linspace(-3, 3, 101)  # float64, more precise than the output
    output = golden.astype(np.float16)
    assert v.verify(output, golden, "float16").passed


def test_complex_single_benchmark():
    g = np.array([1 + 1j, 2 - 1j], np.complex64)
    assert v.single_benchmark(g, g).passed
    assert not v.single_benchmark(g * (1 + 1e-3), g).passed


def test_double_benchmark_passes_what_working_precision_cannot_avoid():
    """A float32 sum that cancels to small values: the single benchmark fails it (small-value
    errors), the double benchmark passes it while a second float32 implementation errs as
    much, and fails it when ours errs far more."""
    rng = np.random.default_rng(0)
    big = rng.uniform(-5, 5, 4096)
    golden = big * 1e-6  # small values (|g| < 2^-14) that a cancelling sum produces
    benchmark = (golden + rng.normal(0, 3e-8, golden.size)).astype(np.float32)
    ours = (golden + rng.normal(0, 3e-8, golden.size)).astype(np.float32)
    assert not v.single_benchmark(ours, golden, np.float32).passed
    assert v.double_benchmark(ours, golden, benchmark, np.float32).passed
    worse = (golden + rng.normal(0, 3e-6, golden.size)).astype(np.float32)
    report = v.double_benchmark(worse, golden, benchmark, np.float32)
    assert not report.passed and any("RMSE" in r for r in report.reasons)


def test_double_benchmark_ints_are_exact():
    assert v.double_benchmark(np.arange(4), np.arange(4), np.arange(4)).passed
    assert not v.double_benchmark(np.arange(4) + 1, np.arange(4), np.arange(4) + 1).passed
