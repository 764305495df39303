"""ONNX ScatterElements, ScatterND, GatherND, GatherElements, Einsum, LRN and Dropout through
the converter, each against onnxruntime on small models: attributes, reductions, dtypes,
negative indices, constant and computed index tensors; indices out of range at run time are
a clean AclError and leave the session usable."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import ACL_ERROR_PARSE_MODEL, AclError  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402
from openacl.runtime import core  # noqa: E402

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def model_of(nodes, feeds, initializers=None, opset=18):
    """A model over ``feeds`` (name -> array, any dtype); outputs typed by shape inference."""
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            a.shape) for n, a in feeds.items()]
    outputs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
               for n in nodes[-1].output if n]
    graph = helper.make_graph(nodes, "test", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), n)
                               for n, a in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    for output in model.graph.output:  # what inference leaves untyped: the first input's
        if not output.type.tensor_type.elem_type:
            output.type.tensor_type.elem_type = inputs[0].type.tensor_type.elem_type
    return model


def ours(model, feeds, session=None):
    """Our outputs; the model must compile whole (one engine, nothing on the host)."""
    own = session is None
    session = session or InferenceSession(model)
    try:
        assert session.engine is not None, "the model did not compile into one engine"
        return session.run(None, feeds)
    finally:
        if own:
            session.close()


def steps_of(model) -> list[str]:
    session = InferenceSession(model)
    try:
        return [step.op for step in session.engine.lowered.steps]
    finally:
        session.close()


def compare(model, feeds, rtol=1e-6, atol=1e-6):
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, want in zip(ours(model, feeds), expected, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def fails_at_run(model, good, bad, what):
    """``bad`` feeds fail with a clean AclError naming ``what`` (run on a stream of their
    own, which the failure leaves failed, and on the CPU backend also right here); ``good``
    ones still run afterwards."""
    session = InferenceSession(model)
    try:
        expected = ours(model, good, session)
        stream = openacl.rt.create_stream()
        try:
            with pytest.raises(AclError) as info:
                session.run(None, bad, stream=stream)
            assert what in str(info.value), str(info.value)
        finally:
            openacl.rt.destroy_stream_force(stream)
        if core.current().backend.name == "cpu":
            with pytest.raises(AclError) as info:
                session.run(None, bad)
            assert what in str(info.value), str(info.value)
        for got, want in zip(ours(model, good, session), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    finally:
        session.close()


# -- ScatterElements ---------------------------------------------------------------------------
def _scatter_operands(shape, axis, count, unique, dtype=np.float32, index_dtype=np.int64):
    size = shape[axis]
    index_shape = tuple(count if k == axis else n for k, n in enumerate(shape))
    if unique:
        rows = np.stack([RNG.permutation(size)[:count] for _ in
                         range(int(np.prod(index_shape)) // count)])
        rest = [n for k, n in enumerate(index_shape) if k != axis]
        index = np.moveaxis(rows.reshape(*rest, count), -1, axis)
    else:
        index = RNG.integers(0, size, index_shape)
    index = np.where(RNG.random(index_shape) < 0.5, index - size, index)  # negatives too
    data = (RNG.standard_normal(shape) * 3).astype(dtype)
    updates = (RNG.standard_normal(index_shape) * 3).astype(dtype)
    return data, index.astype(index_dtype), updates


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("constant", [False, True])
def test_scatter_elements(reduction, axis, constant):
    shape = (4, 5, 3)
    data, index, updates = _scatter_operands(shape, axis % 3, 2, reduction == "none")
    attrs = {"axis": axis} | ({} if reduction == "none" else {"reduction": reduction})
    feeds = {"data": data, "updates": updates} | ({} if constant else {"indices": index})
    model = model_of([node("ScatterElements", ["data", "indices", "updates"], **attrs)],
                     feeds, {"indices": index} if constant else None)
    compare(model, feeds, rtol=1e-6)


@pytest.mark.parametrize("dtype, index_dtype, reduction", [
    (np.int64, np.int32, "add"), (np.int32, np.int64, "mul"), (np.float16, np.int64, "max")])
def test_scatter_elements_dtypes(dtype, index_dtype, reduction):
    data, index, updates = _scatter_operands((6, 4), 0, 5, False, dtype, index_dtype)
    feeds = {"data": data, "indices": index, "updates": updates}
    compare(model_of([node("ScatterElements", ["data", "indices", "updates"],
                           reduction=reduction)], feeds), feeds)


def test_scatter_elements_opset_11_default_axis():
    data, index, updates = _scatter_operands((3, 4), 0, 2, True)
    feeds = {"data": data, "indices": index, "updates": updates}
    compare(model_of([node("ScatterElements", ["data", "indices", "updates"])], feeds,
                     opset=11), feeds)


def test_scatter_elements_index_out_of_range_is_an_error():
    data, index, updates = _scatter_operands((4, 3), 0, 2, True)
    feeds = {"data": data, "indices": index, "updates": updates}
    model = model_of([node("ScatterElements", ["data", "indices", "updates"])], feeds)
    for wrong in (4, -5, 1000):
        bad = index.copy()
        bad[1, 1] = wrong
        fails_at_run(model, feeds, feeds | {"indices": bad}, "aclnnScatter")
    model = model_of([node("ScatterElements", ["data", "indices", "updates"],
                           reduction="max")], feeds)
    fails_at_run(model, feeds, feeds | {"indices": index + 10}, "aclnnScatterReduce")


# -- ScatterND -------------------------------------------------------------------------------
def _nd_operands(shape, depth, count, unique):
    leading = shape[:depth]
    if unique:
        flat = RNG.permutation(int(np.prod(leading)))[:count]
    else:
        flat = RNG.integers(0, int(np.prod(leading)), count)
    index = np.stack(np.unravel_index(flat, leading), -1).astype(np.int64)
    index = np.where(RNG.random(index.shape) < 0.4, index - np.array(leading), index)
    updates = (RNG.standard_normal((count, *shape[depth:])) * 3).astype(np.float32)
    return index, updates


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("constant", [False, True])
def test_scatter_nd(reduction, depth, constant):
    shape = (4, 3, 5)
    data = (RNG.standard_normal(shape) * 3).astype(np.float32)
    index, updates = _nd_operands(shape, depth, 6 if depth > 1 else 3, reduction == "none")
    index, updates = index.reshape(3, -1, depth), updates.reshape(3, -1, *shape[depth:])
    attrs = {} if reduction == "none" else {"reduction": reduction}
    feeds = {"data": data, "updates": updates} | ({} if constant else {"indices": index})
    model = model_of([node("ScatterND", ["data", "indices", "updates"], **attrs)], feeds,
                     {"indices": index} if constant else None)
    compare(model, feeds)


def test_scatter_nd_on_an_int64_shape_tensor():
    feeds = {"data": np.array([2, 3, 4, 5], np.int64)}
    model = model_of([node("ScatterND", ["data", "indices", "updates"])], feeds,
                     {"indices": np.array([[-1], [1]], np.int64),
                      "updates": np.array([7, 0], np.int64)})
    compare(model, feeds)


@pytest.mark.parametrize("reduction", ["none", "add", "min"])
def test_scatter_nd_index_out_of_range_is_an_error(reduction):
    data = np.zeros((4, 3), np.float32)
    index = np.array([[1, 2], [0, -3]], np.int64)
    feeds = {"data": data, "indices": index, "updates": np.ones(2, np.float32)}
    attrs = {} if reduction == "none" else {"reduction": reduction}
    model = model_of([node("ScatterND", ["data", "indices", "updates"], **attrs)], feeds)
    what = "aclnnScatterNd" if reduction == "none" else "aclnnScatter"
    for wrong in ([1, 3], [4, 0], [-5, 0], [0, -4]):  # one entry out: never another row
        fails_at_run(model, feeds, feeds | {"indices": np.array([[1, 2], wrong])}, what)


# -- GatherND / GatherElements -------------------------------------------------------------------
@pytest.mark.parametrize("batch_dims, data_shape, index_shape", [
    (0, (4, 5, 3), (2, 3, 2)), (0, (4, 5), (3, 2)), (0, (4, 5, 3), (6, 1)),
    (1, (2, 4, 5), (2, 3, 1)), (1, (2, 4, 5), (2, 2)), (1, (3, 4, 5, 2), (3, 2, 2, 2)),
    (2, (2, 3, 4, 5), (2, 3, 6, 1)), (2, (2, 3, 4), (2, 3, 1))])
@pytest.mark.parametrize("constant", [False, True])
def test_gather_nd_with_batch_dims(batch_dims, data_shape, index_shape, constant):
    depth = index_shape[-1]
    limits = np.array(data_shape[batch_dims:batch_dims + depth])
    index = RNG.integers(-limits, limits, index_shape).astype(np.int64)
    data = RNG.standard_normal(data_shape).astype(np.float32)
    feeds = {"data": data} | ({} if constant else {"indices": index})
    model = model_of([node("GatherND", ["data", "indices"], batch_dims=batch_dims)], feeds,
                     {"indices": index} if constant else None, opset=13)
    compare(model, feeds)


def test_gather_nd_int_data_and_index_out_of_range():
    data = RNG.integers(-9, 9, (2, 3, 4)).astype(np.int32)
    index = np.array([[[0, 2]], [[-1, 3]]], np.int64)
    feeds = {"data": data, "indices": index}
    model = model_of([node("GatherND", ["data", "indices"], batch_dims=1)], feeds)
    compare(model, feeds)
    fails_at_run(model, feeds, feeds | {"indices": np.array([[[0, 4]], [[0, 0]]])},
                 "aclnnGatherNd")


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_gather_elements(axis, index_dtype):
    data = RNG.standard_normal((4, 5)).astype(np.float32)
    size = data.shape[axis]
    index = RNG.integers(-size, size, (3, 4) if axis == 0 else (4, 3)).astype(index_dtype)
    feeds = {"data": data, "indices": index}
    model = model_of([node("GatherElements", ["data", "indices"], axis=axis)], feeds)
    compare(model, feeds)
    constant = model_of([node("GatherElements", ["data", "indices"], axis=axis)],
                        {"data": data}, {"indices": index})
    compare(constant, {"data": data})
    fails_at_run(model, feeds, feeds | {"indices": index * 0 + size}, "aclnnGather")
    fails_at_run(model, feeds, feeds | {"indices": index * 0 - size - 1}, "aclnnGather")


# -- Einsum -------------------------------------------------------------------------------------
EQUATIONS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhid,bhjd->bhij", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("bhij,bhjd->bhid", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 6)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 6)]),
    ("bij->bji", [(2, 3, 4)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ba", [(3, 4)]),
    ("i,i->", [(5,)]),
    ("i,i", [(5,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("...ii->...i", [(3, 4, 4)]),
    ("bii->b", [(2, 3, 3)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bi,bi->b", [(3, 4), (3, 4)]),
    ("bi,bi->bi", [(3, 4), (3, 4)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
    ("bqhd,bkhd->bhqk", [(2, 4, 3, 8), (2, 5, 3, 8)]),
    ("Bij,Bjk->Bik", [(2, 3, 4), (2, 4, 5)]),
    ("...j,...j->...", [(2, 1, 4), (1, 3, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_matches_onnxruntime(equation, shapes):
    terms = equation.split("->")[0].split(",")
    shapes = shapes if len(shapes) == len(terms) else shapes * len(terms)
    feeds = {f"x{k}": RNG.standard_normal(s).astype(np.float32) for k, s in enumerate(shapes)}
    model = model_of([node("Einsum", list(feeds), equation=equation)], feeds, opset=12)
    compare(model, feeds, rtol=1e-5, atol=1e-5)
    assert "Einsum" not in steps_of(model)  # permutes, sums and products


def test_einsum_in_other_dtypes():
    feeds = {"a": RNG.standard_normal((2, 3, 4)).astype(np.float16),
             "b": RNG.standard_normal((2, 4, 5)).astype(np.float16)}
    compare(model_of([node("Einsum", ["a", "b"], equation="bij,bjk->bik")], feeds), feeds,
            rtol=2e-3, atol=2e-3)
    feeds = {"a": RNG.integers(-5, 5, (3, 4)).astype(np.int64),
             "b": RNG.integers(-5, 5, (4, 2)).astype(np.int64)}
    compare(model_of([node("Einsum", ["a", "b"], equation="ij,jk->ik")], feeds), feeds)


def test_einsum_refuses_equations_it_cannot_read():
    feeds = {"a": np.ones((2, 3), np.float32)}
    for equation in ["ij->k", "i->i", "...i->i"]:
        model = helper.make_model(helper.make_graph(
            [node("Einsum", ["a"], equation=equation)], "t",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, (2, 3))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
            opset_imports=[helper.make_opsetid("", 12)])
        with pytest.raises(AclError):  # refused at conversion, or (no shape) at run time
            session = InferenceSession(model)
            try:
                session.run(None, feeds)
            finally:
                session.close()
    model = model_of([node("Einsum", ["a"], equation="...i->i")], feeds, opset=12)
    with pytest.raises(AclError) as info:
        InferenceSession(model)
    assert info.value.code == ACL_ERROR_PARSE_MODEL and "not supported" in str(info.value)


# -- LRN -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs", [{"size": 3}, {"size": 5, "alpha": 2e-3, "beta": 0.6,
                                                 "bias": 2.0}, {"size": 1}, {"size": 9}])
def test_lrn(attrs):
    feeds = {"x": (RNG.standard_normal((2, 6, 5, 4)) * 3).astype(np.float32)}
    compare(model_of([node("LRN", ["x"], **attrs)], feeds, opset=13), feeds, rtol=1e-5)


def test_lrn_even_sizes_match_the_reference():
    """onnxruntime takes odd sizes only; ONNX's reference has the window one channel
    longer after the channel than before it (its loop runs over dim 0 for the channels:
    batch and channels are equal here)."""
    from onnx.reference import ReferenceEvaluator

    feeds = {"x": (RNG.standard_normal((5, 5, 3, 3)) * 3).astype(np.float32)}
    for size in (2, 4):
        model = model_of([node("LRN", ["x"], size=size, alpha=0.05)], feeds, opset=13)
        (want,) = ReferenceEvaluator(model).run(None, feeds)
        np.testing.assert_allclose(ours(model, feeds)[0], want, rtol=1e-5)


def test_lrn_on_other_ranks():
    for shape in [(2, 5, 7), (2, 5, 3, 2, 2), (3, 5)]:
        x = (RNG.standard_normal(shape) * 3).astype(np.float32)
        model = model_of([node("LRN", ["x"], size=3, alpha=0.01)], {"x": x}, opset=13)
        sums = np.zeros_like(x)  # ONNX's definition, spelled out (its reference is 4-d only)
        for c in range(shape[1]):
            sums[:, c] = (x[:, max(0, c - 1):c + 2] ** 2).sum(1)
        want = x / (1.0 + 0.01 / 3 * sums) ** 0.75
        np.testing.assert_allclose(ours(model, {"x": x})[0], want, rtol=1e-5)


# -- Dropout -------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [11, 13, 22])
def test_dropout_inference_with_mask(opset):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    if opset < 12:
        nodes = [node("Dropout", ["x"], ["y", "mask"], ratio=0.3)]
        inits = {}
    else:
        nodes = [node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=3)]
        inits = {"r": np.float32(0.4), "t": np.bool_(False)}
    model = model_of(nodes, {"x": x}, inits, opset=opset)
    if opset >= 12:
        compare(model, {"x": x})
    # (onnxruntime's opset 10-11 kernel writes an all-false mask; ONNX's reference, like every
    # opset from 12, marks the kept elements: all true in inference)
    y, mask = ours(model, {"x": x})
    assert mask.dtype == np.bool_ and mask.all() and np.array_equal(y, x)


def test_dropout_training_mode():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    zero = model_of([node("Dropout", ["x", "r", "t"], ["y", "mask"])], {"x": x},
                    {"r": np.float32(0.0), "t": np.bool_(True)}, opset=13)
    y, mask = ours(zero, {"x": x})  # a zero ratio drops nothing, even when training
    assert np.array_equal(y, x) and mask.all()
    model = model_of([node("Dropout", ["x", "r", "t"], ["y", "mask"])], {"x": x},
                     {"r": np.float32(0.5), "t": np.bool_(True)}, opset=13)
    with pytest.raises(AclError) as info:
        InferenceSession(model)
    assert "not supported" in str(info.value) and "training" in str(info.value)
    # training_mode as an input: its value keys a stage; True is refused when it comes
    model = model_of([node("Dropout", ["x", "r", "t"], ["y", "mask"])],
                     {"x": x, "t": np.bool_(True)}, {"r": np.float32(0.5)}, opset=13)
    session = InferenceSession(model)
    y, mask = session.run(None, {"x": x, "t": np.array(False)})
    assert np.array_equal(y, x) and mask.all()
    with pytest.raises(AclError) as info:
        session.run(None, {"x": x, "t": np.array(True)})
    assert "not supported" in str(info.value) and "training" in str(info.value)
    session.close()
