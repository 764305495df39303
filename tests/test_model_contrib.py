"""onnxruntime's contrib ops on the host (``openacl.model.host_contrib``), checked against
onnxruntime's CPU provider on small models built here.

DynamicQuantizeLSTM: float weights quantised here the way onnxruntime's quantiser does
(int8 symmetric in [-64, 64], its ``reduce_range``, so that onnxruntime's u8 x s8 kernels
are exact on CPUs without VNNI too; uint8 with a zero point, one for the tensor), per
tensor and per column, every direction, with and without bias, sequence_lens, initial
states and peepholes, the attributes, the outputs' subsets and a batch onnxruntime splits
over its threads: all equal to the bit, but for the activations that go through exp/log
(within 1e-6). Then the errors: attributes, missing inputs, ranks, dtypes and values, each
an AclError naming the node and the value.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_PARSE_MODEL, AclError  # noqa: E402
from openacl.model import host_contrib  # noqa: E402
from openacl.model.host_contrib import contrib_node, mlas_logistic, mlas_tanh, slice_rows  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402

RNG = np.random.default_rng(11)
NODE = "lstm_q"
OPTIONAL = ("B", "sequence_lens", "initial_h", "initial_c", "P")
ORDER = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "W_scale",
         "W_zero_point", "R_scale", "R_zero_point")
FEEDS = ("X", "sequence_lens", "initial_h", "initial_c")  # graph inputs; the rest constants


def quantize(weight: np.ndarray, dtype: type, per_column: bool):
    """(quantised weight, scale, zero point) of a float weight [dirs, K, N], per direction
    or per direction and column, as onnxruntime's quantiser lays them out."""
    axes = (1,) if per_column else (1, 2)
    if dtype is np.int8:  # symmetric, reduce_range: [-64, 64]
        scale = np.max(np.abs(weight), axis=axes, keepdims=True) / 64
        q = np.clip(np.rint(weight / scale), -64, 64).astype(np.int8)
        zero = np.zeros(scale.shape, np.int8)
    elif per_column:  # uint8 per column: one zero point for the tensor (onnxruntime's rule)
        scale = np.max(np.abs(weight), axis=axes, keepdims=True) / 127
        zero = np.full(scale.shape, 128, np.uint8)
        q = np.clip(np.rint(weight / scale) + 128, 0, 255).astype(np.uint8)
    else:  # uint8 per tensor, asymmetric
        low = np.minimum(weight.min(axis=axes, keepdims=True), 0)
        high = np.maximum(weight.max(axis=axes, keepdims=True), 0)
        scale = (high - low) / 255
        zero = np.clip(np.rint(-low / scale), 0, 255).astype(np.uint8)
        q = np.clip(np.rint(weight / scale) + zero, 0, 255).astype(np.uint8)
    shape = (weight.shape[0], weight.shape[2]) if per_column else (weight.shape[0],)
    return q, scale.astype(np.float32).reshape(shape), zero.reshape(shape)


def lstm_values(seq=5, batch=3, size=7, hidden=6, dirs=1, dtype=np.int8, per_column=False,
                optional=OPTIONAL, lengths=None):
    """The node's inputs by name (X, the quantised weights and the chosen optional ones)."""
    values = {"X": RNG.normal(0, 1.5, (seq, batch, size)).astype(np.float32)}
    for name, rows in (("W", size), ("R", hidden)):
        weight = RNG.normal(0, 0.3, (dirs, rows, 4 * hidden))
        values[name], values[f"{name}_scale"], values[f"{name}_zero_point"] = \
            quantize(weight, dtype, per_column)
    extra = {
        "B": lambda: RNG.normal(0, 0.5, (dirs, 8 * hidden)),
        "sequence_lens": lambda: np.array(lengths if lengths is not None else
                                          RNG.integers(1, seq + 1, batch), np.int32),
        "initial_h": lambda: RNG.normal(0, 0.5, (dirs, batch, hidden)),
        "initial_c": lambda: RNG.normal(0, 0.5, (dirs, batch, hidden)),
        "P": lambda: RNG.normal(0, 0.5, (dirs, 3 * hidden)),
    }
    for name in optional:
        value = extra[name]()
        values[name] = value if value.dtype == np.int32 else value.astype(np.float32)
    return values


def lstm_model(values, outputs=("Y", "Y_h", "Y_c"), feeds=FEEDS, around=False, **attrs):
    """A model of one DynamicQuantizeLSTM over ``values`` (those named in ``feeds`` are graph
    inputs, the others initializers); ``around``: a Mul on X before it and an Add on Y_h
    after it (compiled stages on either side)."""
    attrs.setdefault("hidden_size", values["R"].shape[1] if "R" in values else 6)
    names = [name if name in values else "" for name in ORDER]
    nodes = []
    if around:
        nodes.append(h.make_node("Mul", ["X", "k"], ["X_scaled"]))
        names[0] = "X_scaled"
    node_outputs = list(outputs)
    if around:
        node_outputs[1] = "Y_h_raw"
    while names and not names[-1]:
        names.pop()
    nodes.append(h.make_node("DynamicQuantizeLSTM", names, node_outputs, name=NODE,
                             domain="com.microsoft", **attrs))
    if around:
        nodes.append(h.make_node("Add", ["Y_h_raw", "k"], [outputs[1]]))
    inputs = [h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(values[name].dtype),
                                       values[name].shape)
              for name in ORDER if name in values and name in feeds]
    initializers = [numpy_helper.from_array(values[name], name) for name in ORDER
                    if name in values and name not in feeds]
    if around:
        initializers.append(numpy_helper.from_array(np.float32(0.5), "k"))
    graph = h.make_graph(nodes, "dql", inputs,
                         [h.make_tensor_value_info(name, T.FLOAT, None) for name in outputs
                          if name], initializers)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                              h.make_opsetid("com.microsoft", 1)])


def feeds_of(values, feeds=FEEDS):
    return {name: values[name] for name in ORDER if name in values and name in feeds}


def onnxruntime(model, feeds, threads=1):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def ours(model, feeds, runs=1):
    session = InferenceSession(model)
    try:
        for _ in range(runs):
            got = session.run(None, feeds)
        return got
    finally:
        session.close()


def check(model, feeds, atol=0.0, threads=1):
    want = onnxruntime(model, feeds, threads)
    got = ours(model, feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, (a.shape, b.shape)
        if atol:
            np.testing.assert_allclose(a, b, rtol=0, atol=atol)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.usefixtures("kernel_path")  # the C steps and the numpy loop
# -- bit-exact against onnxruntime ----------------------------------------------------------
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("per_column", [False, True], ids=["per-tensor", "per-column"])
@pytest.mark.parametrize("optional", [(), OPTIONAL, ("B", "initial_h", "initial_c"),
                                      ("sequence_lens", "P")],
                         ids=["plain", "all", "states", "lengths-peepholes"])
def test_matches_onnxruntime(direction, dtype, per_column, optional):
    dirs = 2 if direction == "bidirectional" else 1
    values = lstm_values(dirs=dirs, dtype=dtype, per_column=per_column, optional=optional)
    check(lstm_model(values, direction=direction), feeds_of(values))


@pytest.mark.usefixtures("kernel_path")  # the C steps and the numpy loop
@pytest.mark.parametrize("dtype,name,size,hidden", [(np.uint8, "W", 1000, 12),
                                                    (np.int8, "W", 1100, 8),
                                                    (np.uint8, "R", 16, 600)])
def test_long_rows_are_summed_in_exact_blocks(dtype, name, size, hidden):
    values = lstm_values(seq=4, batch=2, size=size, hidden=hidden, dtype=dtype)
    weights = host_contrib.IntegerWeights(values[name][0], int(values[f"{name}_zero_point"][0]))
    assert weights.block < weights.matrix.shape[0]  # more than one float32 block
    check(lstm_model(values), feeds_of(values))


@pytest.mark.usefixtures("kernel_path")  # the C steps and the numpy loop
@pytest.mark.parametrize("hidden", [7, 37, 200])
def test_hidden_sizes_off_the_unit_blocks_match_onnxruntime(hidden):
    """The C recurrence's column blocks of 16 units with a ragged last one and columns past
    the last SIMD vector (7, 37), and a step cut into parallel tasks of whole blocks (200:
    4 x 200 x 200 multiply-adds)."""
    values = lstm_values(seq=4, batch=2, size=5, hidden=hidden, per_column=True)
    check(lstm_model(values), feeds_of(values))


@pytest.mark.parametrize("attrs", [
    {"clip": 0.6},
    {"input_forget": 1},
    {"activations": ["Relu", "Tanh", "Sigmoid", "HardSigmoid", "Affine", "Softsign"],
     "activation_alpha": [0.3, 0.8], "activation_beta": [0.4, 0.1]},
    {"activations": ["LeakyRelu", "ThresholdedRelu", "Relu", "Sigmoid", "Affine", "Tanh"],
     "activation_alpha": [0.2, 0.1, 1.5], "activation_beta": [0.25]},
    {"activations": ["sigmoid", "tanh", "tanh", "Sigmoid", "Tanh", "Tanh"], "clip": 2.0,
     "input_forget": 1},
], ids=["clip", "input-forget", "activations", "activations-alpha-beta", "lower-case"])
def test_attributes_match_onnxruntime(attrs):
    values = lstm_values(dirs=2, per_column=True)
    check(lstm_model(values, direction="bidirectional", **attrs), feeds_of(values))


def test_exp_activations_agree_within_an_ulp():
    values = lstm_values(dirs=2)
    model = lstm_model(values, direction="bidirectional",
                       activations=["Sigmoid", "ScaledTanh", "Elu", "Sigmoid", "Softplus",
                                    "Tanh"], activation_alpha=[0.8, 1.2], activation_beta=[0.7])
    check(model, feeds_of(values), atol=1e-6)


@pytest.mark.usefixtures("kernel_path")  # the C steps and the numpy loop
@pytest.mark.parametrize("outputs", [("Y",), ("", "Y_h"), ("", "Y_h", "Y_c"), ("", "", "Y_c")])
def test_output_subsets_match_onnxruntime(outputs):
    # without Y onnxruntime steps on Y_h's buffer, where a finished entry keeps its state
    # (and so takes part in the next step's quantisation): the lengths differ on purpose
    values = lstm_values(dirs=2, lengths=[5, 2, 4])
    check(lstm_model(values, outputs=outputs, direction="bidirectional"), feeds_of(values))


@pytest.mark.parametrize("lengths", [[5, 0, 3], [0, 0, 0], [2, 1, 2]],
                         ids=["one-empty", "all-empty", "shorter-than-seq"])
def test_sequence_lengths_match_onnxruntime(lengths):
    values = lstm_values(dirs=2, lengths=lengths)
    check(lstm_model(values, direction="bidirectional"), feeds_of(values))


def test_empty_sequence_and_empty_batch():
    for seq, batch in ((0, 2), (3, 0)):
        values = lstm_values(seq=seq, batch=batch, optional=())
        y, y_h, y_c = ours(lstm_model(values), feeds_of(values))
        assert y.shape == (seq, 1, batch, 6) and y_h.shape == y_c.shape == (1, batch, 6)
        assert not y_h.any() and not y_c.any()


@pytest.mark.parametrize("batch,hidden", [(3, 6), (5, 6), (7, 300), (3, 300)])
def test_threaded_onnxruntime_is_matched_with_its_thread_count(monkeypatch, batch, hidden):
    values = lstm_values(seq=6, batch=batch, hidden=hidden, dirs=2, per_column=True)
    model = lstm_model(values, direction="bidirectional")
    monkeypatch.setattr(host_contrib, "ONNXRUNTIME_THREADS", 2)
    check(model, feeds_of(values), threads=2)


def test_slice_rows_follows_onnxruntime():
    assert slice_rows(3, 6, 1) == 3 and slice_rows(1, 6, 8) == 1
    assert slice_rows(3, 6, 2) == 2 and slice_rows(5, 6, 2) == 3 and slice_rows(7, 300, 2) == 4
    assert slice_rows(3, 300, 2) == 3 and slice_rows(4, 512, 16) == 4  # not split
    assert slice_rows(16, 512, 16) == 1


def test_computed_weights_are_read_on_every_run():
    values = lstm_values(optional=("B",))
    feeds = ("X", "W", "R")
    model = lstm_model(values, feeds=feeds)
    session = InferenceSession(model)
    try:
        for _ in range(2):
            run = feeds_of(values, feeds)
            want = onnxruntime(model, run)
            for a, b in zip(session.run(None, run), want, strict=True):
                np.testing.assert_array_equal(a, b)
            values = {**values, "W": RNG.integers(-64, 65, values["W"].shape).astype(np.int8),
                      "R": RNG.integers(-64, 65, values["R"].shape).astype(np.int8)}
    finally:
        session.close()


def test_between_compiled_stages():
    values = lstm_values(dirs=2, optional=("B", "initial_h", "initial_c"))
    model = lstm_model(values, direction="bidirectional", around=True)
    want = onnxruntime(model, feeds_of(values))
    got = ours(model, feeds_of(values), runs=2)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_activation_kernels_are_mlas_bit_for_bit():
    x = np.concatenate([RNG.normal(0, 4, 50000), RNG.uniform(-30, 30, 20000),
                        [0, -0.0, 1e-30, 9, -9, 18, -18, 40, -40]]).astype(np.float32)
    for op, ours_fn in (("Sigmoid", mlas_logistic), ("Tanh", mlas_tanh)):
        graph = h.make_graph([h.make_node(op, ["x"], ["y"])], op,
                             [h.make_tensor_value_info("x", T.FLOAT, None)],
                             [h.make_tensor_value_info("y", T.FLOAT, None)])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        np.testing.assert_array_equal(ours_fn(x), onnxruntime(model, {"x": x})[0])


def test_other_contrib_ops_fall_back():
    node = h.make_node("FusedGemm", ["a", "b"], ["c"], domain="com.microsoft")
    assert contrib_node(node, None, {}) is None


# -- errors ---------------------------------------------------------------------------------
def _error(model, feeds) -> AclError:
    with pytest.raises(AclError) as info:
        session = InferenceSession(model)
        try:
            session.run(None, feeds)
        finally:
            session.close()
    assert NODE in info.value.message and "DynamicQuantizeLSTM" in info.value.message
    return info.value


@pytest.mark.parametrize("attrs,expected", [
    ({"direction": "sideways"}, "'sideways'"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"activations": ["Sigmoid", "Swish", "Tanh"]}, "'Swish'"),
    ({"activations": ["Sigmoid", "Tanh"]}, "must name 3"),
    ({"layout": 1}, "layout 1"),
    ({"clip": -1.0}, "clip"),
    ({"peephole": 1}, "'peephole'"),
])
def test_bad_attributes(attrs, expected):
    values = lstm_values(optional=())
    error = _error(lstm_model(values, **attrs), feeds_of(values))
    assert error.code == ACL_ERROR_PARSE_MODEL and expected in error.message, error.message


def test_missing_required_input():
    values = lstm_values(optional=())
    del values["R_scale"]
    error = _error(lstm_model(values), feeds_of(values))
    assert error.code == ACL_ERROR_PARSE_MODEL and "R_scale" in error.message


def _with(values, **changes):
    return {**values, **changes}


@pytest.mark.parametrize("change,expected", [
    (lambda v: _with(v, X=v["X"][0]), "input X 'X' is float32 [3, 7]"),
    (lambda v: _with(v, W=v["W"].astype(np.float32)), "input W 'W' is float32"),
    (lambda v: _with(v, W=v["W"][:, :4]), "[1, 7, 24]"),
    (lambda v: _with(v, W_scale=np.ones((1, 5), np.float32)), "input W_scale"),
    (lambda v: _with(v, R_zero_point=v["R_zero_point"].astype(np.uint8)), "R_zero_point"),
    (lambda v: _with(v, R=v["R"].view(np.uint8), R_zero_point=np.zeros(1, np.uint8)),
     "one type"),
    (lambda v: _with(v, sequence_lens=np.array([1, 9, 2], np.int32)), "[1, 9, 2]"),
    (lambda v: _with(v, sequence_lens=np.array([1, 2, 2], np.int64)), "int32 [3]"),
    (lambda v: _with(v, initial_h=v["initial_h"][:, :2]), "input initial_h"),
    (lambda v: _with(v, B=v["B"][:, :10]), "input B"),
], ids=["x-rank", "w-dtype", "w-shape", "scale-shape", "zero-point-dtype", "w-r-types",
        "lengths-range", "lengths-dtype", "state-shape", "bias-shape"])
def test_bad_inputs(change, expected):
    values = change(lstm_values(optional=("B", "sequence_lens", "initial_h", "initial_c")))
    error = _error(lstm_model(values), feeds_of(values))
    assert error.code == ACL_ERROR_INVALID_PARAM and expected in error.message, error.message


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_per_column_zero_points_onnxruntime_refuses(dtype):
    values = lstm_values(dtype=dtype, per_column=True, optional=())
    zero = values["W_zero_point"].copy()
    zero[0, 3] += 1
    values["W_zero_point"] = zero
    error = _error(lstm_model(values), feeds_of(values))
    assert error.code == ACL_ERROR_INVALID_PARAM and "W_zero_point" in error.message
    with pytest.raises(Exception, match="point must be"):  # onnxruntime refuses it too
        onnxruntime(lstm_model(values), feeds_of(values))


@pytest.mark.parametrize("hidden,batch,zero", [(7, 1, 0), (37, 3, 0), (200, 2, 128),
                                               (768, 1, 0)])
def test_vnni_recurrence_equals_the_pairs_kernel(hidden, batch, zero):
    """The recurrence's AVX-512 VNNI kernel (u8 x s8 quads, the state's zero point taken off
    by column sums) gives the pairs kernel's sums exactly, so the same states to the bit:
    full-range int8 weights (-128 included), ragged unit blocks and quads (7, 37), a batch,
    an unsigned weight with its zero point, a step cut into parallel tasks (768)."""
    from openacl.ops import native

    lib = native.kernels()
    if lib is None or not lib.dq_lstm_vnni():
        pytest.skip("no AVX-512 VNNI on this CPU (or no C extension): the pairs kernel runs")
    steps = 6
    dtype = np.uint8 if zero else np.int8
    info = np.iinfo(dtype)
    weights = host_contrib.IntegerWeights(
        RNG.integers(info.min, int(info.max) + 1, (hidden, 4 * hidden)).astype(dtype), zero)
    assert weights.unit_quads is not None
    gates_x = RNG.standard_normal((steps, batch, 4 * hidden)).astype(np.float32)
    scale = np.array([2e-3], np.float32)
    bias = RNG.standard_normal(4 * hidden).astype(np.float32)
    results = []
    for quads in (None, weights.unit_quads):
        h = RNG.standard_normal((batch, hidden)).astype(np.float32) if not results else \
            results[0][3].copy()
        c = np.ones((batch, hidden), np.float32)
        start = h.copy()
        y = np.zeros((steps, batch, hidden), np.float32)
        lib.dq_lstm_sequence(gates_x, weights.unit_pairs, scale, bias, h, c, y,
                             (steps, batch, hidden), 10.0, False, *(quads or ()))
        results.append((h, c, y, start))
    for ours, theirs in zip(results[0][:3], results[1][:3], strict=True):
        np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(ValueError, match="quads"):  # a quad layout of the wrong size
        quads, sums = weights.unit_quads
        lib.dq_lstm_sequence(gates_x, weights.unit_pairs, scale, bias, h, c, y,
                             (steps, batch, hidden), 10.0, False, quads[:-1], sums)


@pytest.mark.parametrize("rows,depth,columns,zero", [(1, 5, 3, 0), (7, 40, 130, 17),
                                                     (80, 768, 3072, 255), (5, 2050, 64, 128)])
def test_vnni_integer_product_is_the_exact_int32_product(rows, depth, columns, zero,
                                                         monkeypatch):
    """``IntegerWeights.product`` by the int8 GEMM (VNNI) equals the exact integer product
    rounded once to float32, and the float32 block path to the bit: ragged rows, depths
    and column blocks, zero points 0..255, a depth past one exact float32 block (2050)."""
    from openacl.ops import native

    lib = native.kernels()
    if lib is None or not lib.dq_lstm_vnni():
        pytest.skip("no AVX-512 VNNI on this CPU (or no C extension): the float path runs")
    weights = host_contrib.IntegerWeights(
        RNG.integers(-128, 128, (depth, columns)).astype(np.int8), 0)
    a = RNG.integers(0, 256, (rows, depth)).astype(np.float32)
    exact = ((a.astype(np.int64) - zero) @ weights.matrix.astype(np.int64)).astype(np.float32)
    ours = weights.product(a, zero)
    np.testing.assert_array_equal(ours, exact)
    monkeypatch.setattr(host_contrib, "USE_VNNI", False)
    np.testing.assert_array_equal(weights.product(a, zero), ours)
    quads, sums = weights.column_quads
    with pytest.raises(ValueError, match="a_zero"):
        lib.int8_gemm(np.zeros((rows, quads.shape[1] * 4), np.uint8), 256, quads, sums,
                      np.empty((rows, columns), np.float32), (rows, depth, columns))
    with pytest.raises(ValueError, match="quads"):
        lib.int8_gemm(np.zeros((rows, quads.shape[1] * 4), np.uint8), 0, quads.ravel()[:-1], sums,
                      np.empty((rows, columns), np.float32), (rows, depth, columns))


def test_directions_at_once_refuse_bad_calls():
    """dq_lstm_sequences (a bidirectional node's two directions at once; the ONNX tests
    above check their results against onnxruntime): a list of calls, each checked as
    dq_lstm_sequence checks it; a bad one fails the call before anything runs."""
    from openacl.ops import native

    lib = native.kernels()
    if lib is None:
        pytest.skip("no C extension")
    hidden, steps = 8, 2
    weights = host_contrib.IntegerWeights(RNG.integers(-64, 65, (hidden, 4 * hidden))
                                          .astype(np.int8), 0)
    h, c = np.zeros((1, hidden), np.float32), np.zeros((1, hidden), np.float32)
    good = (np.zeros((steps, 1, 4 * hidden), np.float32), weights.unit_pairs,
            np.array([1e-2], np.float32), None, h, c, None, (steps, 1, hidden), 1.0, False)
    lib.dq_lstm_sequences([good, good[:4] + (h.copy(), c.copy()) + good[6:]])
    with pytest.raises(TypeError, match="list"):
        lib.dq_lstm_sequences((good,))
    with pytest.raises(ValueError, match="bad sizes"):
        lib.dq_lstm_sequences([good, good[:7] + ((steps, 1, 0),) + good[8:]])
