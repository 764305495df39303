"""ONNX quantization operators through the converter, bit-exact against onnxruntime:
QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked; int8, uint8, int16,
uint16; constant and computed scales and zero points; halfway quotients and saturation),
DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (the exact
integer accumulation on float32 or float64 kernels, onnxruntime's requantization), and a
small QDQ network."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from openacl.errors import AclError  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402
from ort_exactness import assert_equal_or_skip  # noqa: E402
from test_model_ops_index import model_of, node, ours, steps_of  # noqa: E402

RNG = np.random.default_rng(23)
U8, I8, U16, I16 = (np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16))


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def expected(model, feeds, optimized=True):
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def exact(model, feeds):
    """Our outputs equal onnxruntime's to the bit."""
    for got, want in zip(ours(model, feeds), expected(model, feeds), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
        assert_equal_or_skip(got, want)


def _split(values: dict, constant: bool):
    """(feeds, initializers): the values as graph inputs, or as constants but ``x``."""
    values = {k: np.asarray(v) for k, v in values.items()}
    if constant:
        return {k: v for k, v in values.items() if k in ("x", "a")}, \
            {k: v for k, v in values.items() if k not in ("x", "a")}
    return dict(values), {}


def _quantized(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


# -- QuantizeLinear / DequantizeLinear ------------------------------------------------------
def _quantize_case(dtype, granularity, shape=(2, 6, 5)):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    info = np.iinfo(dtype)
    if granularity == "tensor":
        scale, axis, block = np.float32(0.05), 1, 0
        point = np.array(RNG.integers(info.min, info.max + 1), dtype)
    elif granularity == "axis":
        axis, block = 1, 0
        scale = RNG.uniform(0.01, 0.1, shape[axis]).astype(np.float32)
        point = RNG.integers(info.min, info.max + 1, shape[axis]).astype(dtype)
    else:  # blocks of 4 along dim 1 (the last block shorter)
        axis, block = 1, 4
        blocked = (shape[0], -(-shape[1] // block), shape[2])
        scale = RNG.uniform(0.01, 0.1, blocked).astype(np.float32)
        point = RNG.integers(info.min, info.max + 1, blocked).astype(dtype)
    # halfway quotients (ties round to even) and values far past the range (saturation)
    base = np.float32(np.asarray(scale).reshape(-1)[0])
    x.reshape(-1)[:6] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e6], np.float32) * base
    attrs = {"axis": axis} | ({"block_size": block} if block else {})
    return x, scale, point, attrs


@pytest.mark.parametrize("dtype", [U8, I8, U16, I16], ids=str)
@pytest.mark.parametrize("granularity", ["tensor", "axis", "block"])
@pytest.mark.parametrize("constant", [True, False])
def test_quantize_linear(dtype, granularity, constant):
    x, scale, point, attrs = _quantize_case(dtype, granularity)
    feeds, inits = _split({"x": x, "s": scale, "z": point}, constant)
    exact(model_of([node("QuantizeLinear", ["x", "s", "z"], **attrs)], feeds, inits,
                   opset=21), feeds)


@pytest.mark.parametrize("opset", [10, 13, 19])
def test_quantize_linear_older_opsets_and_no_zero_point(opset):
    x, scale, point, attrs = _quantize_case(U8, "tensor" if opset == 10 else "axis")
    inits = {"s": scale}
    exact(model_of([node("QuantizeLinear", ["x", "s"], **({} if opset == 10 else attrs))],
                   {"x": x}, inits, opset=opset), {"x": x})
    exact(model_of([node("QuantizeLinear", ["x", "s", "z"], **({} if opset == 10 else attrs))],
                   {"x": x}, inits | {"z": point}, opset=opset), {"x": x})
    # one scale: float32 passes (x / s rounded, saturated less the zero point, cast)
    assert steps_of(model_of([node("QuantizeLinear", ["x", "s"])], {"x": x},
                             {"s": np.float32(0.1)}, opset=opset)) == [
        "Div", "InplaceRound", "InplaceNanToNum", "Clamp", "Cast"]


@pytest.mark.parametrize("dtype", [U8, I8, U16, I16], ids=str)
@pytest.mark.parametrize("point", [0, 3, -1], ids=["no-offset", "offset", "top"])
def test_quantize_linear_per_tensor_nan_inf_and_ties_as_onnxruntime(dtype, point):
    # NaN goes to the low end of the range, as onnxruntime's MLAS kernel sends it; inf
    # saturates; quotients at .5 round to even; past the range saturates
    info = np.iinfo(dtype)
    offset = np.array(info.max if point == -1 else point, dtype)
    x = (RNG.standard_normal(4000) * 60).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, 0.025, 0.075, -0.025, 1e30, -1e30]
    x[8:400] = (np.round(x[8:400] / np.float32(0.05) * 2) / 2 * np.float32(0.05))
    exact(model_of([node("QuantizeLinear", ["x", "s", "z"])], {"x": x},
                   {"s": np.float32(0.05), "z": offset}, opset=21), {"x": x})


def test_quantize_linear_float16_input_and_output_dtype_attribute():
    x = (RNG.standard_normal((3, 8)) * 2).astype(np.float16)
    exact(model_of([node("QuantizeLinear", ["x", "s", "z"])], {"x": x},
                   {"s": np.float16(0.03), "z": np.int8(-3)}, opset=19), {"x": x})
    model = model_of([node("QuantizeLinear", ["x", "s"], output_dtype=onnx.TensorProto.INT8)],
                     {"x": x.astype(np.float32)}, {"s": np.float32(0.03)}, opset=21)
    exact(model, {"x": x.astype(np.float32)})


@pytest.mark.parametrize("dtype", [U8, I8, U16, I16, np.dtype(np.int32)], ids=str)
@pytest.mark.parametrize("granularity", ["tensor", "axis", "block"])
@pytest.mark.parametrize("constant", [True, False])
def test_dequantize_linear(dtype, granularity, constant):
    _, scale, point, attrs = _quantize_case(I8 if dtype == np.int32 else dtype, granularity)
    if dtype == np.int32:  # int32 (bias) tensors have no zero point
        point = np.zeros_like(point, np.int32)
    x = _quantized(dtype, (2, 6, 5))
    feeds, inits = _split({"x": x, "s": scale, "z": point}, constant)
    exact(model_of([node("DequantizeLinear", ["x", "s", "z"], **attrs)], feeds, inits,
                   opset=21), feeds)


def test_dequantize_linear_float16_scale():
    x = _quantized(U8, (4, 3))
    exact(model_of([node("DequantizeLinear", ["x", "s", "z"], axis=0)], {"x": x},
                   {"s": RNG.uniform(0.01, 1, 4).astype(np.float16),
                    "z": _quantized(U8, (4,))}, opset=19), {"x": x})


def test_dequantize_linear_of_int4_weights_is_computed_at_conversion():
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    weight = RNG.integers(-8, 8, (6, 4)).astype(ml_dtypes.int4)
    scale = RNG.uniform(0.01, 0.1, (3, 4)).astype(np.float32)
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    model = model_of([node("DequantizeLinear", ["w", "s"], ["wf"], axis=0, block_size=2),
                      node("MatMul", ["x", "wf"])], {"x": x}, {"w": weight, "s": scale},
                     opset=21)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(ours(model, {"x": x})[0], want, rtol=1e-6)


def _format_sweep(dtype):
    """Every finite value of a float format, the halfway points between neighbours (ties),
    values a hair either side of them, values past the largest one, infinities, NaN."""
    grid = np.unique(np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32))
    grid = grid[np.isfinite(grid)]
    halfway = (grid[1:] + grid[:-1]) / 2
    hair = np.concatenate([np.nextafter(halfway, np.float32(np.inf)),
                           np.nextafter(halfway, np.float32(-np.inf))])
    largest = grid.max()
    beyond = np.array([largest * 1.04, largest * 1.07, largest * 3, 1e30, np.inf, -np.inf,
                       np.nan, -largest * 1.07, 1e-30, -1e-30, -0.0], np.float32)
    return np.concatenate([grid, halfway, hair, beyond]).astype(np.float32)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_quantize_linear_to_float_formats_rounds_as_onnx(fmt, saturate):
    """Round to nearest, ties to even, saturating or overflowing (NaN for e4m3fn,
    infinity for e5m2) as ONNX's reference (ml_dtypes' casts) does."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    dtype = np.dtype(getattr(ml_dtypes, fmt))
    x = _format_sweep(dtype)
    attrs = {"saturate": saturate} if fmt != "float4_e2m1fn" else {}
    for scale in (np.float32(1.0), np.float32(0.5)):
        model = model_of([node("QuantizeLinear", ["x", "s", "z"], **attrs)], {"x": x * scale},
                         {"s": scale, "z": np.zeros((), dtype)}, opset=21)
        (want,) = ReferenceEvaluator(model).run(None, {"x": x * scale})
        (got,) = ours(model, {"x": x * scale})
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    if fmt == "float8_e4m3fn":  # onnxruntime hands float8 back as its bytes
        model = model_of([node("QuantizeLinear", ["x", "s", "z"], **attrs)], {"x": x},
                         {"s": np.float32(1), "z": np.zeros((), dtype)}, opset=21)
        (want,) = expected(model, {"x": x})
        got = ours(model, {"x": x})[0].view(np.uint8)
        same = (got == want) | (np.isnan(got.view(dtype).astype(np.float32)) &
                                np.isnan(want.view(dtype).astype(np.float32)))
        assert same.all(), (x[~same], got[~same], want[~same])


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "int4"])
def test_storage_formats_at_run_time_match_the_reference(fmt):
    """Quantized to the format and back, scales and zero points computed or constant."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    dtype = np.dtype(getattr(ml_dtypes, fmt))
    x = (RNG.standard_normal((3, 8)) * 4).astype(np.float32)
    scale = RNG.uniform(0.3, 0.9, 3).astype(np.float32)
    point = np.array([0, -1, 2] if fmt == "int4" else [0, 0, 0], np.float32).astype(dtype)
    for constant in (True, False):
        values = {"x": x, "s": scale, "z": point}
        feeds, inits = _split(values, constant)
        model = model_of([node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
                          node("DequantizeLinear", ["q", "s", "z"], axis=0)], feeds, inits,
                         opset=21)
        model.graph.output.insert(0, onnx.helper.make_tensor_value_info(
            "q", onnx.helper.np_dtype_to_tensor_dtype(dtype), (3, 8)))
        want = ReferenceEvaluator(model).run(None, feeds)
        for got, expect in zip(ours(model, feeds), want, strict=True):
            assert got.dtype == expect.dtype
            np.testing.assert_array_equal(got.astype(np.float32), expect.astype(np.float32))


def test_formats_without_an_acl_data_type_are_refused_with_a_clear_error():
    import ml_dtypes

    x = RNG.standard_normal((4,)).astype(np.float32)
    model = model_of([node("QuantizeLinear", ["x", "s", "z"])],
                     {"x": x, "z": np.zeros((), ml_dtypes.uint4)},
                     {"s": np.float32(0.1)}, opset=21)
    with pytest.raises(AclError) as info:
        InferenceSession(model)
    assert "uint4" in str(info.value) and "not supported" in str(info.value)

# -- DynamicQuantizeLinear ------------------------------------------------------------------------
@pytest.mark.parametrize("values", ["normal", "positive", "negative", "zeros", "tiny"])
def test_dynamic_quantize_linear(values):
    x = {"normal": RNG.standard_normal((3, 7)) * 5,
         "positive": RNG.uniform(0.5, 9, (3, 7)),
         "negative": -RNG.uniform(0.5, 9, (3, 7)),
         "zeros": np.zeros((3, 7)),
         "tiny": RNG.standard_normal((3, 7)) * 1e-30}[values].astype(np.float32)
    model = model_of([node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"])],
                     {"x": x}, opset=11)
    exact(model, {"x": x})  # (all zeros: scale 1, onnxruntime's; ONNX's reference: 1 / 255)


# -- MatMulInteger / ConvInteger ----------------------------------------------------------------
@pytest.mark.parametrize("a_dtype, b_dtype", [(U8, U8), (I8, I8), (U8, I8), (I8, U8)],
                         ids=str)
@pytest.mark.parametrize("zero_points", ["none", "tensor", "vector"])
@pytest.mark.parametrize("constant", [True, False])
def test_matmul_integer(a_dtype, b_dtype, zero_points, constant):
    a, b = _quantized(a_dtype, (2, 3, 8)), _quantized(b_dtype, (8, 5))
    values = {"a": a, "b": b}
    inputs = ["a", "b"]
    if zero_points != "none":
        values["az"] = _quantized(a_dtype, () if zero_points == "tensor" else (3,))
        values["bz"] = _quantized(b_dtype, () if zero_points == "tensor" else (5,))
        inputs += ["az", "bz"]
    if zero_points == "vector":  # onnxruntime takes a per-tensor a_zero_point only
        values["az"] = values["az"][:1].reshape(())
    feeds, inits = _split(values, constant)
    exact(model_of([node("MatMulInteger", inputs)], feeds, inits, opset=10), feeds)


def test_matmul_integer_sums_beyond_float32_use_float64():
    """2048 products of 255 * 255 per output: partial sums past 2**24."""
    a = np.full((2, 2048), 255, np.uint8)
    b = _quantized(U8, (2048, 3))
    b[:, 0] = 255
    feeds = {"a": a, "b": b}
    model = model_of([node("MatMulInteger", ["a", "b"])], feeds, opset=10)
    exact(model, feeds)
    assert ours(model, feeds)[0][0, 0] == 2048 * 255 * 255
    small = model_of([node("MatMulInteger", ["a", "b"])], {"a": a[:, :8]}, {"b": b[:8]},
                     opset=10)
    exact(small, {"a": a[:, :8]})  # (constant weights bound the sums: float32 there)


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1]}, {"strides": [2, 2]},
                                   {"group": 2}, {"dilations": [2, 2], "pads": [2, 1, 2, 1]},
                                   {"auto_pad": "SAME_UPPER"}])
@pytest.mark.parametrize("constant", [True, False])
def test_conv_integer(attrs, constant):
    x = _quantized(U8, (1, 4, 7, 6))
    w = _quantized(U8, (6, 4 // attrs.get("group", 1), 3, 3))
    values = {"x": x, "w": w, "xz": np.uint8(131), "wz": np.uint8(77)}  # (per tensor only
    # in onnxruntime; ONNX's node tests check per-channel ones)
    feeds, inits = _split(values, constant)
    exact(model_of([node("ConvInteger", ["x", "w", "xz", "wz"], **attrs)], feeds, inits,
                   opset=10), feeds)


# -- QLinearMatMul / QLinearConv ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [U8, I8], ids=str)
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("constant", [True, False])
def test_qlinear_matmul(dtype, per_column, constant):
    a, b = _quantized(dtype, (2, 4, 16)), _quantized(dtype, (16, 6))
    columns = 6 if per_column else 1
    values = {"a": a, "as": np.float32(0.02), "az": _quantized(dtype, ()), "b": b,
              "bs": RNG.uniform(0.005, 0.05, columns).astype(np.float32).reshape(
                  (columns,) if per_column else ()),
              "bz": _quantized(dtype, (columns,) if per_column else ()),
              "ys": np.float32(0.3), "yz": _quantized(dtype, ())}
    feeds, inits = _split(values, constant)
    exact(model_of([node("QLinearMatMul", list(values))], feeds, inits, opset=10), feeds)


def test_qlinear_matmul_rounds_halfway_products_to_even_before_the_zero_point():
    a = np.array([[1], [3], [5], [7]], np.uint8)
    model = model_of([node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"])],
                     {"a": a}, {"as": np.float32(1), "az": np.uint8(0),
                                "b": np.ones((1, 1), np.uint8), "bs": np.float32(1),
                                "bz": np.uint8(0), "ys": np.float32(2), "yz": np.uint8(1)},
                     opset=10)
    exact(model, {"a": a})
    assert ours(model, {"a": a})[0].ravel().tolist() == [1, 3, 3, 5]  # rint(x/2) + 1


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1]}, {"strides": [2, 1]},
                                   {"group": 3}, {"dilations": [2, 2]},
                                   {"auto_pad": "SAME_UPPER", "strides": [2, 2]}])
@pytest.mark.parametrize("dtype", [U8, I8], ids=str)
def test_qlinear_conv(attrs, dtype):
    x = _quantized(dtype, (2, 6, 8, 7))
    w = _quantized(I8, (9, 6 // attrs.get("group", 1), 3, 3))
    bias = RNG.integers(-5000, 5000, 9).astype(np.int32)
    values = {"x": x, "xs": np.float32(0.03), "xz": _quantized(dtype, ()), "w": w,
              "ws": RNG.uniform(0.001, 0.01, 9).astype(np.float32), "wz": np.zeros(9, np.int8),
              "ys": np.float32(0.7), "yz": _quantized(dtype, ()), "B": bias}
    feeds, inits = _split(values, True)
    exact(model_of([node("QLinearConv", list(values), **attrs)], feeds, inits, opset=10),
          feeds)


def test_qlinear_conv_with_computed_weights_and_scales():
    """Weights fed at run time: the sums are bounded by the dtype only (float64 kernels)."""
    x = _quantized(U8, (1, 32, 6, 6))
    values = {"x": x, "xs": np.float32(0.05), "xz": np.uint8(128), "w": _quantized(U8, (4, 32,
                                                                                      3, 3)),
              "ws": np.float32(0.004), "wz": np.uint8(120), "ys": np.float32(0.9),
              "yz": np.uint8(7)}
    feeds, _ = _split(values, False)
    model = model_of([node("QLinearConv", list(values), pads=[1, 1, 1, 1])], feeds, opset=10)
    exact(model, feeds)
    assert "Cast" in steps_of(model)


# -- a QDQ network ---------------------------------------------------------------------------------
def test_a_qdq_network_matches_onnxruntime():
    """Q -> DQ -> Conv -> Q -> DQ -> Relu -> Q -> DQ -> MatMul -> Q -> DQ, as onnxruntime's
    quantizer writes it: the Conv and MatMul groups become QLinearConv / QLinearMatMul
    (``fusions.fuse_qdq``), as onnxruntime fuses them, so the values equal its own to the
    bit; its unfused run (the float convolution's rounding landing on the other side of a
    halfway quotient here and there) is within one step."""
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = (RNG.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
    ws = (np.abs(w).reshape(16, -1).max(1) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
    m = (RNG.standard_normal((10, 4)) * 0.3).astype(np.float32)
    ms = np.float32(np.abs(m).max() / 127)
    inits = {"xs": np.float32(0.03), "xz": np.uint8(128), "wq": wq, "ws": ws,
             "wz": np.zeros(16, np.int8), "cs": np.float32(0.1), "cz": np.uint8(100),
             "mq": np.clip(np.rint(m / ms), -127, 127).astype(np.int8), "ms": ms,
             "mz": np.int8(0), "ys": np.float32(0.2), "yz": np.uint8(90)}
    nodes = [node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             node("QuantizeLinear", ["c", "cs", "cz"], ["cq"]),
             node("DequantizeLinear", ["cq", "cs", "cz"], ["cd"]),
             node("Relu", ["cd"], ["r"]),
             node("QuantizeLinear", ["r", "cs", "cz"], ["rq"]),
             node("DequantizeLinear", ["rq", "cs", "cz"], ["rd"]),
             node("DequantizeLinear", ["mq", "ms", "mz"], ["md"]),
             node("MatMul", ["rd", "md"], ["p"]),
             node("QuantizeLinear", ["p", "ys", "yz"], ["pq"]),
             node("DequantizeLinear", ["pq", "ys", "yz"], ["y"])]
    model = model_of(nodes, {"x": x}, inits, opset=13)
    (got,) = ours(model, {"x": x})
    assert_equal_or_skip(got, expected(model, {"x": x})[0])
    (want,) = expected(model, {"x": x}, optimized=False)
    steps = np.abs(got - want) / inits["ys"]
    assert steps.max() <= 1.0001 and np.mean(steps > 0.5) < 0.01, steps.max()
    from openacl.model.onnx_import import import_onnx
    from openacl.model.passes import optimize

    fused = {node.op_type for node in optimize(import_onnx(model)).nodes}
    assert {"QLinearConv", "QLinearMatMul"} <= fused and not {"Conv", "MatMul"} & fused


def test_the_new_lowerings_survive_the_offline_file(tmp_path):
    """Their steps (scalars, dtypes, int arrays, tables) are written into an .om and replay."""
    from openacl.model.converter import convert_onnx

    x = RNG.standard_normal((2, 6, 5)).astype(np.float32)
    index = np.array([[[0, 4], [1, -1]], [[-1, 2], [0, 0]]], np.int64)
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=1),
             node("DynamicQuantizeLinear", ["d"], ["dq", "ds", "dz"]),
             node("DequantizeLinear", ["dq", "ds", "dz"], ["e"]),
             node("Einsum", ["e", "e"], ["f"], equation="bij,bkj->bik"),
             node("ScatterND", ["f", "i", "u"], ["g"], reduction="max"),
             node("LRN", ["g"], size=3)]
    inits = {"s": RNG.uniform(0.02, 0.05, 6).astype(np.float32),
             "z": RNG.integers(-3, 3, 6).astype(np.int8), "i": index,
             "u": RNG.standard_normal((2, 2, 6)).astype(np.float32)}
    model = model_of(nodes, {"x": x}, inits, opset=21)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    convert_onnx(path, tmp_path / "m.om")
    session = InferenceSession(str(tmp_path / "m.om"))
    try:
        (got,) = session.run(None, {"x": x})
    finally:
        session.close()
    np.testing.assert_array_equal(got, ours(model, {"x": x})[0])
    # (float8 / int4 values cannot be written into an .om yet: om.py's dtype list lacks them)
