"""Loop-invariant code motion (model/loop_hoisting.py, host_nodes.LoopNode): which nodes a
Loop computes once per run, that the hoisted loop gives the unhoisted loop's bits and
onnxruntime's values, and the cases that must not move (random ops, shape arithmetic, a
counter, a copy that does not settle, a loop that does not run)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from openacl.model import host_nodes  # noqa: E402
from openacl.model.loop_hoisting import plan_hoisting  # noqa: E402
from openacl.model.staged import StagedModel  # noqa: E402

RNG = np.random.default_rng(11)
HIDDEN = 8


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _body(extra_nodes=(), copy_ops="paddle"):
    """A decoder-like body: ``enc`` (outer, run-time) @ ``w1`` and the carried copy ``k`` @
    ``w2`` are loop-invariant; the state ``s`` and the counter ``n`` change every iteration;
    ``k`` comes back as Squeeze(Add(Unsqueeze(k), 0)) (a Paddle export's copy) or, with
    ``copy_ops="cast"``, as Cast(k, int32) then Cast(float) (settles on its second pass)."""
    if copy_ops == "paddle":
        copy = [h.make_node("Unsqueeze", ["k", "axis0"], ["k_u"]),
                h.make_node("Add", ["k_u", "zero"], ["k_a"]),
                h.make_node("Squeeze", ["k_a", "axis0"], ["k2"])]
    else:
        copy = [h.make_node("Cast", ["k"], ["k_i"], to=T.INT32),
                h.make_node("Cast", ["k_i"], ["k2"], to=T.FLOAT)]
    nodes = [
        h.make_node("MatMul", ["enc", "w1"], ["keys"]),          # outer run-time invariant
        h.make_node("Tanh", ["keys"], ["keys_t"]),
        h.make_node("MatMul", ["k", "w2"], ["kw"]),              # a settled carried copy
        h.make_node("ReduceSum", ["keys_t", "axis0"], ["pooled"], keepdims=0),
        h.make_node("Add", ["pooled", "kw"], ["mix"]),
        h.make_node("Add", ["s", "mix"], ["pre"]),
        h.make_node("Tanh", ["pre"], ["s2"]),
        h.make_node("Add", ["n", "one"], ["n2"]),                # a counter: never a copy
        h.make_node("Identity", ["c"], ["c2"]),
        *copy, *extra_nodes]
    return h.make_graph(
        nodes, "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("s", T.FLOAT, [HIDDEN]),
         h.make_tensor_value_info("k", T.FLOAT, [HIDDEN]),
         h.make_tensor_value_info("n", T.FLOAT, [1])],
        [h.make_tensor_value_info("c2", T.BOOL, []),
         h.make_tensor_value_info("s2", T.FLOAT, [HIDDEN]),
         h.make_tensor_value_info("k2", T.FLOAT, [HIDDEN]),
         h.make_tensor_value_info("n2", T.FLOAT, [1]),
         h.make_tensor_value_info("s2", T.FLOAT, [HIDDEN])],
        [numpy_helper.from_array(np.array([0], np.int64), "axis0"),
         numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
         numpy_helper.from_array(np.ones(1, np.float32), "one")])


def _model(body):
    weights = [numpy_helper.from_array(RNG.standard_normal((HIDDEN, HIDDEN)).astype(np.float32)
                                       * 0.3, name) for name in ("w1", "w2")]
    loop = h.make_node("Loop", ["m", "", "s0", "k0", "n0"], ["s", "k", "n", "states"],
                       body=body)
    graph = h.make_graph(
        [loop], "decoder",
        [h.make_tensor_value_info("enc", T.FLOAT, [5, HIDDEN]),
         h.make_tensor_value_info("s0", T.FLOAT, [HIDDEN]),
         h.make_tensor_value_info("k0", T.FLOAT, [HIDDEN]),
         h.make_tensor_value_info("n0", T.FLOAT, [1]),
         h.make_tensor_value_info("m", T.INT64, [])],
        [h.make_tensor_value_info(name, T.FLOAT, None) for name in ("s", "k", "n", "states")],
        weights)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _feeds(trips=6):
    k0 = RNG.standard_normal(HIDDEN).astype(np.float32)
    k0[0] = -0.0  # the copy's first pass makes it +0.0: the loop must see both
    return {"enc": RNG.standard_normal((5, HIDDEN)).astype(np.float32),
            "s0": RNG.standard_normal(HIDDEN).astype(np.float32), "k0": k0,
            "n0": np.zeros(1, np.float32), "m": np.array(trips, np.int64)}


def _loop(staged):
    stage, = staged._cache.values()
    loop, = [host for host in stage.host_nodes if isinstance(host, host_nodes.LoopNode)]
    return loop


def _run(model, feeds, hoist, monkeypatch, prologues=None):
    monkeypatch.setattr(host_nodes, "HOIST_LOOP_INVARIANTS", hoist)
    staged = StagedModel(model)
    if prologues is not None:
        original = host_nodes.LoopNode._hoisted_env

        def counted(self, carried, env):
            prologues.append(len(carried))
            return original(self, carried, env)
        monkeypatch.setattr(host_nodes.LoopNode, "_hoisted_env", counted)
    return staged, staged.run(feeds)


def test_the_plan_moves_the_invariant_products_only():
    body = _body()
    plan = plan_hoisting(body, {"w1", "w2"}, lambda name: None)
    moved = [node.output[0] for node in plan.prologue.node]
    # the products and what only they feed, and the copy of k up to its last node (k2, a
    # body output, stays in the body, reading k_a from the prologue)
    assert moved == ["keys", "keys_t", "kw", "pooled", "mix", "k_u", "k_a"], moved
    assert plan.settle == (1,)  # k: a copy through Unsqueeze, Add 0, Squeeze
    assert plan.prologue_formals == (1,)  # (s and the counter n stay in the body)
    assert plan.needed == ("k_a", "mix")
    kept = [node.op_type for node in plan.body.node]
    assert "MatMul" not in kept and kept.count("Tanh") == 1  # s2's, not keys'


def test_hoisted_loop_gives_the_unhoisted_bits_and_onnxruntimes_values(monkeypatch):
    model, feeds = _model(_body()), _feeds()
    prologues = []
    staged, hoisted = _run(model, feeds, True, monkeypatch, prologues)
    assert _loop(staged).hoist is not None and prologues == [3]  # once, for 6 iterations
    _, plain = _run(model, feeds, False, monkeypatch)
    for ours, theirs in zip(hoisted, plain, strict=True):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert ours.tobytes() == theirs.tobytes()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for ours, theirs in zip(hoisted, session.run(None, feeds), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.signbit(hoisted[1][0])  # k after the copy: -0.0 + 0 = +0.0, as onnxruntime
    staged.run(feeds)  # a second run: its own prologue (enc may differ between runs)
    assert len(prologues) == 2


def test_a_copy_that_settles_later_hoists_then_and_one_that_does_not_runs_plain(monkeypatch):
    model, feeds = _model(_body(copy_ops="cast")), _feeds()
    feeds["k0"] = feeds["k0"] * np.float32(3.7)  # casts to int32 round the first pass
    prologues = []
    _, hoisted = _run(model, feeds, True, monkeypatch, prologues)
    assert prologues == [3]  # after the two passes that settle k
    _, plain = _run(model, feeds, False, monkeypatch)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(hoisted, plain, strict=True))
    monkeypatch.setattr(host_nodes, "SETTLE_ITERATIONS", 1)
    prologues.clear()
    _, unsettled = _run(model, feeds, True, monkeypatch, prologues)
    assert prologues == []  # k had not settled after one pass: this run stays plain
    assert all(a.tobytes() == b.tobytes() for a, b in zip(unsettled, plain, strict=True))


def test_a_loop_that_does_not_run_computes_no_prologue(monkeypatch):
    model, feeds = _model(_body()), _feeds(trips=0)
    prologues = []
    _, results = _run(model, feeds, True, monkeypatch, prologues)
    assert prologues == []
    np.testing.assert_array_equal(results[0], feeds["s0"])


def test_random_ops_and_shape_arithmetic_stay_in_the_body():
    extra = [h.make_node("RandomNormalLike", ["enc"], ["noise"]),
             h.make_node("Shape", ["enc"], ["enc_shape"]),
             h.make_node("Gather", ["enc_shape", "axis0"], ["rows"])]
    body = _body(extra)
    del body.output[4:]
    body.output.extend([h.make_tensor_value_info("noise", T.FLOAT, None),
                        h.make_tensor_value_info("rows", T.INT64, None)])
    plan = plan_hoisting(body, {"w1", "w2"}, lambda name: None)
    moved = {node.output[0] for node in plan.prologue.node}
    assert not moved & {"noise", "enc_shape", "rows"}
    assert {"keys", "kw"} <= moved


def test_a_body_with_nothing_invariant_has_no_plan():
    body = _body()
    del body.node[:3]  # no product of invariants left
    body.node.insert(0, h.make_node("Identity", ["s"], ["keys_t"]))
    body.node.insert(1, h.make_node("Identity", ["s"], ["kw"]))
    assert plan_hoisting(body, {"w1", "w2"}, lambda name: None) is None
