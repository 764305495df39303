"""The ONNX-ML ops on the host (``openacl.model.host_ml``), checked against onnxruntime's CPU
provider (one intra-op thread: its order of summation) on models built here.

Tree ensembles: random trees of a chosen depth (seeded), thresholds and features drawn from
one grid so that EQ/NEQ/MEMBER splits are hit, NaN features with and without missing-value
tracking; every mode, aggregate and post transform, one and several targets, base values,
float/double/int inputs, opsets 1/3 (attributes and ``*_as_tensor``) and 5 (TreeEnsemble,
BRANCH_MEMBER); binary and multi-class classifiers with positive and mixed weights, int64 and
string labels; onnxruntime's quirks one by one; the dense and the lane walks against each
other. Scores within 1e-6 (float) or 1e-12 (double) relative, sums without a transform to
the bit, labels exactly. ZipMap, the linear models, Normalizer, Scaler, Binarizer and
ArrayFeatureExtractor likewise. Most checks build the runner with ``host_node`` over a
minimal model; models also run whole through ``InferenceSession``, string labels and
ZipMap's maps included. Then the errors, each an AclError naming the node. The
atspm-detector LightGBM models (the zoo's, when cached: ``openacl fetch atspm-phase``) are
compared too.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from openacl.errors import (  # noqa: E402
    ACL_ERROR_INTERNAL_ERROR,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model import host_ml  # noqa: E402
from openacl.model.host_ml import (  # noqa: E402
    TreeEnsembleRegressorNode,
    compute_logistic,
    compute_probit,
    ml_node,
)
from openacl.model.host_nodes import ReferenceNode, host_node  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402
from openacl.ops import native  # noqa: E402

ML = "ai.onnx.ml"
NODE = "ml_node"
GRID = np.array([-2.5, -1.0, -0.5, 0.0, 0.25, 1.0, 1.5, 3.0])  # features and thresholds
MEMBER_VALUES = np.array([-2.0, -1.0, 0.0, 1.0, 3.0, 40.0])  # BRANCH_MEMBER sets from these
V3_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
V5_MODE = {name: number for number, name in enumerate(V3_MODES)} | {"MEMBER": 6}
TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
ONNX_TYPE = {np.float32: T.FLOAT, np.float64: T.DOUBLE, np.int64: T.INT64, np.int32: T.INT32}
ATSPM = ("atspm-phase", "atspm-function", "atspm-stacker")  # zoo keys (openacl.cli.zoo)


class FakeModel:
    """What a host runner reads of its StagedModel."""

    name = "ml"
    weights: dict = {}


# --- models and runs ----------------------------------------------------------------------

def value_info(name, elem, shape):
    if elem == "map":  # ZipMap's output: a sequence of maps
        return h.make_value_info(name, h.make_sequence_type_proto(h.make_map_type_proto(
            shape, h.make_tensor_type_proto(T.FLOAT, None))))
    return h.make_tensor_value_info(name, elem, shape)


def ml_model(op, attrs, inputs, outputs, ml_opset=3):
    """A one-node model: ``inputs``/``outputs`` are (name, elem type, shape)."""
    node = h.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], name=NODE,
                       domain=ML, **attrs)
    graph = h.make_graph([node], "ml", [value_info(*i) for i in inputs],
                         [value_info(*o) for o in outputs])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                               h.make_opsetid(ML, ml_opset)])
    model.ir_version = 8 if ml_opset < 5 else 10
    return model


def onnxruntime(model, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def runner_of(model):
    return host_node(model.graph.node[0], FakeModel(), {})


def ours(model, feeds):
    """The node's outputs from its host runner, in order."""
    node = model.graph.node[0]
    result = runner_of(model).run(feeds)
    return [result[name] for name in node.output]


def whole(model, feeds):
    session = InferenceSession(model)
    try:
        return session.run(None, feeds)
    finally:
        session.close()


def assert_scores(got, want, double=False, exact=False):
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        tolerance = 1e-12 if double else 1e-6
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def features(rng, rows, columns, dtype=np.float32, nan=0.1):
    """Features from the thresholds' grid (EQ splits are hit), some off it, some NaN."""
    x = rng.choice(GRID, size=(rows, columns))
    off = rng.random(x.shape) < 0.3
    x[off] = rng.normal(0, 2, off.sum())
    if np.dtype(dtype).kind == "i":
        return np.round(x).astype(dtype)
    x[rng.random(x.shape) < nan] = np.nan
    return x.astype(dtype)


# --- random trees -------------------------------------------------------------------------

def random_trees(rng, trees, depth, columns, modes, targets=1, track=0.3, weights=(1, 1),
                 leaf_share=0.25):
    """Trees as node lists (the root first, depth-first): ('branch', mode, feature,
    threshold, tracks, true position, false position) or ('leaf', [(target, weight)]);
    a MEMBER branch's threshold is its set."""
    shape = (rng, depth, columns, modes, targets, track, weights, leaf_share)
    forest = []
    for _ in range(trees):
        nodes: list = []
        _grow(nodes, 0, shape)
        forest.append(nodes)
    return forest


def _grow(nodes, level, shape):
    rng, depth, columns, modes, targets, track, weights, leaf_share = shape
    index = len(nodes)
    nodes.append(None)
    if level == depth or (level and rng.random() < leaf_share):
        count = int(rng.integers(weights[0], weights[1] + 1))
        chosen = rng.choice(targets, size=min(count, targets), replace=False)
        nodes[index] = ("leaf", [(int(t), float(rng.normal())) for t in chosen])
        return index
    mode = modes[int(rng.integers(len(modes)))]
    if mode == "MEMBER":  # int sets (onnxruntime's), within its bitmask or not
        threshold = sorted(set(rng.choice(MEMBER_VALUES, int(rng.integers(1, 4))).tolist()))
    else:
        threshold = float(rng.choice(GRID)) if rng.random() < 0.7 else float(rng.normal(0, 2))
    tracks = bool(rng.random() < track)
    feature = int(rng.integers(columns))
    yes = _grow(nodes, level + 1, shape)
    no = _grow(nodes, level + 1, shape)
    nodes[index] = ("branch", mode, feature, threshold, tracks, yes, no)
    return index


def v3_attributes(forest, prefix, double=False, permute=None):
    """TreeEnsembleRegressor (``prefix`` 'target_') or Classifier ('class_') attributes;
    ``double``: thresholds and weights as float64 ``*_as_tensor``; ``permute``: an rng
    renumbering each tree's node ids."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values",
                         "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true", "ids", "treeids", "nodeids",
                         "weights")}
    for tree, nodes in enumerate(forest):
        ids = permute.permutation(len(nodes)).tolist() if permute is not None else \
            list(range(len(nodes)))
        for position, node in enumerate(nodes):
            a["nodes_treeids"].append(tree)
            a["nodes_nodeids"].append(ids[position])
            if node[0] == "branch":
                _, mode, feature, threshold, tracks, yes, no = node
                a["nodes_featureids"].append(feature)
                a["nodes_values"].append(threshold)
                a["nodes_modes"].append(mode)
                a["nodes_truenodeids"].append(ids[yes])
                a["nodes_falsenodeids"].append(ids[no])
                a["nodes_missing_value_tracks_true"].append(int(tracks))
            else:
                for key, value in (("nodes_featureids", 0), ("nodes_values", 0.0),
                                   ("nodes_modes", "LEAF"), ("nodes_truenodeids", 0),
                                   ("nodes_falsenodeids", 0),
                                   ("nodes_missing_value_tracks_true", 0)):
                    a[key].append(value)
                for target, weight in node[1]:
                    a["ids"].append(target)
                    a["treeids"].append(tree)
                    a["nodeids"].append(ids[position])
                    a["weights"].append(weight)
    for key in ("ids", "treeids", "nodeids", "weights"):
        a[prefix + key] = a.pop(key)
    if double:
        for key in ("nodes_values", prefix + "weights"):
            a[key + "_as_tensor"] = numpy_helper.from_array(np.array(a.pop(key), np.float64),
                                                            key + "_as_tensor")
    return a


def v5_attributes(forest, dtype, targets, aggregate=1, transform=0):
    """TreeEnsemble (opset 5) attributes: branches then leaves numbered globally, one
    weight per leaf (its first, or 0 for target 0), MEMBER sets separated by NaN."""
    a = {k: [] for k in ("nodes_featureids", "nodes_splits", "nodes_modes",
                         "nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids",
                         "nodes_falseleafs", "nodes_missing_value_tracks_true",
                         "leaf_targetids", "leaf_weights", "tree_roots", "membership_values")}
    for nodes in forest:
        number = {}
        for position, node in enumerate(nodes):
            if node[0] == "branch":
                number[position] = (False, len(a["nodes_featureids"]))
                a["nodes_featureids"].append(0)  # filled below
            else:
                number[position] = (True, len(a["leaf_weights"]))
                target, weight = node[1][0] if node[1] else (0, 0.0)
                a["leaf_targetids"].append(target)
                a["leaf_weights"].append(weight)
        for position, node in enumerate(nodes):
            if node[0] != "branch":
                continue
            _, mode, feature, threshold, tracks, yes, no = node
            index = number[position][1]
            a["nodes_featureids"][index] = feature
            a["nodes_modes"].append(V5_MODE[mode])
            a["nodes_splits"].append(0.0 if mode == "MEMBER" else threshold)
            if mode == "MEMBER":
                a["membership_values"] += threshold + [np.nan]
            for side, child in (("true", yes), ("false", no)):
                leaf, child_index = number[child]
                a[f"nodes_{side}nodeids"].append(child_index)
                a[f"nodes_{side}leafs"].append(int(leaf))
            a["nodes_missing_value_tracks_true"].append(int(tracks))
        assert not number[0][0], "v5_attributes wants a branch at each root"
        a["tree_roots"].append(number[0][1])
    for key in ("nodes_splits", "leaf_weights", "membership_values"):
        if a[key]:
            a[key] = numpy_helper.from_array(np.array(a[key], dtype), key)
        else:
            del a[key]
    a["nodes_modes"] = numpy_helper.from_array(np.array(a["nodes_modes"], np.uint8),
                                               "nodes_modes")
    a.update(n_targets=targets, aggregate_function=aggregate, post_transform=transform)
    return a


def regressor(attrs, dtype, targets, ml_opset=3):
    return ml_model("TreeEnsembleRegressor", attrs, [("X", ONNX_TYPE[dtype], None)],
                    [("Y", T.FLOAT, [None, targets])], ml_opset)


def classifier(attrs, dtype, classes, strings=False):
    label = T.STRING if strings else T.INT64
    return ml_model("TreeEnsembleClassifier", attrs, [("X", ONNX_TYPE[dtype], None)],
                    [("Y", label, [None]), ("Z", T.FLOAT, [None, classes])])


def ensemble(attrs, dtype, targets):
    return ml_model("TreeEnsemble", attrs, [("X", ONNX_TYPE[dtype], None)],
                    [("Y", ONNX_TYPE[dtype], [None, targets])], ml_opset=5)


ROWS = (1, 2, 9)  # the dense walk (up to DENSE_MAX_ROWS rows) and the lanes


# --- TreeEnsembleRegressor ------------------------------------------------------------------

REGRESSOR_CASES = [(modes, dtype) for modes in [(m,) for m in V3_MODES] + [V3_MODES]
                   for dtype in (np.float32, np.float64)]


@pytest.mark.parametrize("modes,dtype", REGRESSOR_CASES,
                         ids=[f"{m[0] if len(m) == 1 else 'mixed'}-{np.dtype(d).name}"
                              for m, d in REGRESSOR_CASES])
def test_regressor_every_mode_matches_onnxruntime(modes, dtype, kernel_path):
    rng = np.random.default_rng(zlib.crc32(repr((modes, np.dtype(dtype).name)).encode()))
    double = dtype == np.float64
    for targets, aggregate, transform in ((1, "SUM", "NONE"), (3, "SUM", "NONE"),
                                          (3, "AVERAGE", "SOFTMAX")):
        forest = random_trees(rng, trees=6, depth=4, columns=5, modes=modes, targets=targets,
                              weights=(1, targets))
        attrs = v3_attributes(forest, "target_", double=double, permute=rng)
        attrs.update(n_targets=targets, aggregate_function=aggregate, post_transform=transform)
        if targets == 3:
            base = rng.normal(size=3)
            attrs["base_values_as_tensor" if double else "base_values"] = \
                numpy_helper.from_array(base, "b") if double else base.tolist()
        model = regressor(attrs, dtype, targets)
        for rows in ROWS:
            x = features(rng, rows, 5, dtype)
            (want,) = onnxruntime(model, {"X": x})
            (got,) = ours(model, {"X": x})
            assert_scores(got, want, exact=transform == "NONE")


@pytest.mark.parametrize("aggregate", AGGREGATES)
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("targets", [1, 3])
def test_regressor_aggregates_and_transforms_match_onnxruntime(aggregate, transform, targets):
    rng = np.random.default_rng(AGGREGATES.index(aggregate) * 10 + TRANSFORMS.index(transform))
    forest = random_trees(rng, trees=5, depth=3, columns=4, modes=V3_MODES, targets=targets,
                          weights=(0, targets), leaf_share=0.3)  # some leaves weightless
    attrs = v3_attributes(forest, "target_")
    attrs.update(n_targets=targets, aggregate_function=aggregate, post_transform=transform,
                 base_values=rng.normal(size=targets).tolist())
    model = regressor(attrs, np.float32, targets)
    x = features(rng, 12, 4)
    (want,) = onnxruntime(model, {"X": x})
    (got,) = ours(model, {"X": x})
    assert_scores(got, want, exact=transform == "NONE")


def test_regressor_min_max_keep_a_first_nan_and_skip_a_later_one():
    rng = np.random.default_rng(5)
    for aggregate in ("MIN", "MAX"):
        forest = random_trees(rng, trees=4, depth=2, columns=3, modes=("BRANCH_LEQ",),
                              targets=2, weights=(1, 2))
        for nodes in forest:
            for position, node in enumerate(nodes):
                if node[0] == "leaf" and rng.random() < 0.3:
                    nodes[position] = ("leaf", [(t, float("nan")) for t, _ in node[1]])
        attrs = v3_attributes(forest, "target_")
        attrs.update(n_targets=2, aggregate_function=aggregate)
        model = regressor(attrs, np.float32, 2)
        x = features(rng, 20, 3)
        assert_scores(ours(model, {"X": x})[0], onnxruntime(model, {"X": x})[0], exact=True)


def test_deep_double_forest_is_summed_to_the_bit_on_both_walks(monkeypatch, kernel_path):
    """A LightGBM-like forest (double thresholds and weights, missing values to the true
    side): the sums of onnxruntime's one-thread order, by the numpy walks (the dense walk
    and the lanes) and by the C walk."""
    rng = np.random.default_rng(17)
    forest = random_trees(rng, trees=120, depth=9, columns=30, modes=("BRANCH_LEQ",),
                          track=0.5, leaf_share=0.15)
    attrs = v3_attributes(forest, "target_", double=True)
    attrs.update(n_targets=1)
    model = regressor(attrs, np.float64, 1)
    x = features(rng, 150, 30, np.float64)
    (want,) = onnxruntime(model, {"X": x})
    for dense_rows in (0, 10**9):  # every row by the lanes, then by the dense walk
        monkeypatch.setattr(host_ml, "DENSE_MAX_ROWS", dense_rows)
        runner = runner_of(model)
        for rows in (1, 3, 150):
            np.testing.assert_array_equal(runner.run({"X": x[:rows]})["Y"], want[:rows])


def test_int_and_1d_inputs_of_the_classifier():
    rng = np.random.default_rng(3)
    forest = random_trees(rng, trees=5, depth=3, columns=1, modes=V3_MODES, targets=3,
                          weights=(1, 3))
    attrs = v3_attributes(forest, "class_")
    attrs.update(classlabels_int64s=[4, 5, 6])
    for dtype in (np.int64, np.int32, np.float32, np.float64):
        model = classifier(attrs, dtype, 3)
        x = features(rng, 10, 1, dtype)
        for feed in (x, x[0].reshape(1)):  # a 1-d X: one row (of one feature, to onnxruntime)
            want = onnxruntime(model, {"X": feed})
            got = ours(model, {"X": feed})
            np.testing.assert_array_equal(got[0], want[0])
            assert_scores(got[1], want[1])


# --- TreeEnsembleClassifier -----------------------------------------------------------------

CLASSIFIER_CASES = [
    # (classes, class ids used, signs, base values, strings)
    (1, "all", "positive", 0, False), (1, "all", "mixed", 1, False),
    (1, "all", "mixed", 2, False),
    (2, "one", "positive", 0, False), (2, "one", "mixed", 0, True),
    (2, "zero", "positive", 1, False), (2, "one", "positive", 2, True),
    (2, "one", "mixed", 2, False), (2, "all", "mixed", 0, False),
    (2, "all", "positive", 2, True), (2, "all", "mixed", 1, False),
    (3, "all", "positive", 0, True), (3, "all", "mixed", 3, False),
    (5, "some", "mixed", 5, True), (5, "all", "positive", 0, False),
]


@pytest.mark.parametrize("classes,ids,signs,bases,strings", CLASSIFIER_CASES)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_classifier_matches_onnxruntime(classes, ids, signs, bases, strings, transform):
    rng = np.random.default_rng(classes * 100 + bases * 10 + TRANSFORMS.index(transform))
    forest = random_trees(rng, trees=4, depth=3, columns=4, modes=V3_MODES, targets=classes,
                          weights=(1, classes), leaf_share=0.3)
    chosen = {"all": range(classes), "one": [1], "zero": [0],
              "some": range(0, classes, 2)}[ids]
    for nodes in forest:
        for position, node in enumerate(nodes):
            if node[0] == "leaf":
                weights = [(int(rng.choice(list(chosen))), abs(w) if signs == "positive" else w)
                           for _, w in node[1]]
                nodes[position] = ("leaf", list(dict(weights).items()))
    attrs = v3_attributes(forest, "class_")
    labels = [f"c{k}" for k in range(classes)] if strings else \
        (np.arange(classes) * 3 + 7).tolist()
    attrs["classlabels_strings" if strings else "classlabels_int64s"] = labels
    attrs["post_transform"] = transform
    if bases:
        attrs["base_values"] = rng.normal(0, 0.3, bases).tolist()
    model = classifier(attrs, np.float32, classes, strings)
    x = features(rng, 25, 4)
    want = onnxruntime(model, {"X": x})
    got = ours(model, {"X": x})
    if strings:
        assert got[0].dtype == object and all(isinstance(v, str) for v in got[0])
    assert got[0].tolist() == want[0].tolist()
    unwritten = classes == 2 and (transform == "PROBIT" and bases < 2 or
                                  bases == 1 and ids == "all")  # onnxruntime's Z[:, 1]
    if unwritten:
        assert_scores(got[1][:, :1], want[1][:, :1])
    else:
        assert_scores(got[1], want[1])


def test_classifier_binary_rules_row_by_row():
    """A stump with every binary rule: one class id or two, signs, 0/1/2 base values; Z's
    second column where onnxruntime writes it."""
    stump = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
                 nodes_missing_value_tracks_true=[1, 0, 0])
    x = np.array([[0.0], [1.0], [np.nan]], np.float32)
    for weights, ids in (([0.3, 0.8], [1, 1]), ([-0.3, 0.8], [1, 1]), ([0.3, 0.8], [0, 0]),
                         ([-0.7, 0.2], [0, 0]), ([0.3, 0.8, 0.1], [0, 0, 1])):
        for base in ([], [0.3], [-0.7], [0.1, 0.2]):
            for transform in ("NONE", "LOGISTIC", "SOFTMAX"):
                attrs = dict(stump, class_treeids=[0] * len(ids),
                             class_nodeids=[1, 2, 1][:len(ids)], class_ids=ids,
                             class_weights=weights, classlabels_int64s=[10, 20],
                             post_transform=transform)
                if base:
                    attrs["base_values"] = base
                model = classifier(attrs, np.float32, 2)
                want, got = onnxruntime(model, {"X": x}), ours(model, {"X": x})
                np.testing.assert_array_equal(got[0], want[0])
                written = not (len(base) == 1 and len(set(ids)) == 2)
                assert_scores(got[1] if written else got[1][:, :1],
                              want[1] if written else want[1][:, :1])


def test_classifier_double_input_sums_in_double():
    rng = np.random.default_rng(23)
    forest = random_trees(rng, trees=30, depth=5, columns=6, modes=("BRANCH_LT",),
                          targets=3, weights=(1, 3))
    attrs = v3_attributes(forest, "class_", double=True)
    attrs.update(classlabels_int64s=[0, 1, 2],
                 base_values_as_tensor=numpy_helper.from_array(np.array([0.1, 0.2, 0.3]), "b"))
    model = classifier(attrs, np.float64, 3)
    x = features(rng, 40, 6, np.float64)
    for got in (ours(model, {"X": x}), whole(model, {"X": x})):
        want = onnxruntime(model, {"X": x})
        np.testing.assert_array_equal(got[0], want[0])
        assert_scores(got[1], want[1], exact=True)


def test_empty_batches():
    rng = np.random.default_rng(6)
    forest = random_trees(rng, trees=3, depth=2, columns=2, modes=("BRANCH_LEQ",), targets=2,
                          weights=(1, 2))
    regressor_attrs = dict(v3_attributes(forest, "target_"), n_targets=2)
    classifier_attrs = dict(v3_attributes(forest, "class_"), classlabels_strings=["a", "b"])
    for model in (regressor(regressor_attrs, np.float32, 2),
                  classifier(classifier_attrs, np.float32, 2, strings=True),
                  ensemble(v5_attributes(forest, np.float64, 2), np.float64, 2)):
        dtype = np.float64 if model.graph.node[0].op_type == "TreeEnsemble" else np.float32
        x = np.zeros((0, 2), dtype)
        want, got = onnxruntime(model, {"X": x}), ours(model, {"X": x})
        for a, b in zip(got, want, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype


# --- TreeEnsemble (opset 5) -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("targets", [1, 3])
@pytest.mark.parametrize("aggregate", range(4))
def test_tree_ensemble_v5_matches_onnxruntime(dtype, targets, aggregate, kernel_path):
    rng = np.random.default_rng(targets * 10 + aggregate + (dtype == np.float64) * 100)
    forest = random_trees(rng, trees=7, depth=4, columns=5, modes=(*V3_MODES, "MEMBER"),
                          targets=targets, leaf_share=0.3)
    for transform in range(5):
        model = ensemble(v5_attributes(forest, dtype, targets, aggregate, transform), dtype,
                         targets)
        for rows in ROWS:
            x = features(rng, rows, 5, dtype)
            (want,) = onnxruntime(model, {"X": x})
            (got,) = ours(model, {"X": x})
            assert_scores(got, want, double=dtype == np.float64 and transform == 0,
                          exact=transform == 0)


def test_tree_ensemble_v5_shapes_of_trees(kernel_path):
    """A tree whose root's children are one leaf (onnxruntime's one-leaf tree), a leaf
    reached from two parents, BRANCH_MEMBER sets within onnxruntime's bitmask (compared
    exactly) and outside it (compared on the truncated feature)."""
    splits = np.array([0.5, 0.0, 3.0, 0.0], np.float64)
    attrs = dict(
        n_targets=2, tree_roots=[0, 2, 3],
        nodes_featureids=[0, 1, 0, 1], nodes_modes=numpy_helper.from_array(
            np.array([0, 6, 1, 6], np.uint8), "m"),
        nodes_splits=numpy_helper.from_array(splits, "s"),
        nodes_truenodeids=[1, 0, 1, 2], nodes_trueleafs=[0, 1, 1, 1],
        nodes_falsenodeids=[1, 1, 1, 0], nodes_falseleafs=[1, 1, 1, 1],  # leaf 1 shared
        nodes_missing_value_tracks_true=[0, 1, 0, 0],
        membership_values=numpy_helper.from_array(np.array([1.0, 3.0, np.nan, -1.0, 40.0]),
                                                  "v"),
        leaf_targetids=[0, 1, 1], leaf_weights=numpy_helper.from_array(
            np.array([2.0, -3.0, 0.5]), "w"))
    model = ensemble(attrs, np.float64, 2)
    x = features(np.random.default_rng(4), 40, 2, np.float64, nan=0.2)
    x[:12, 1] = [1.0, 1.5, 3.0, 2.9, -1.0, -1.7, -0.5, 40.0, 40.9, 1e12, -np.inf, 0.99]
    (want,) = onnxruntime(model, {"X": x})
    np.testing.assert_array_equal(ours(model, {"X": x})[0], want)
    np.testing.assert_array_equal(whole(model, {"X": x})[0], want)


def test_a_set_onnxruntime_refuses_is_compared_as_onnx_says(kernel_path):
    """A non-integer BRANCH_MEMBER value outside [0, 30]: onnxruntime refuses the model,
    ONNX's reference evaluator compares exactly, and so does the runner."""
    from onnx.reference import ReferenceEvaluator

    attrs = dict(n_targets=1, tree_roots=[0], nodes_featureids=[0],
                 nodes_modes=numpy_helper.from_array(np.array([6], np.uint8), "m"),
                 nodes_splits=numpy_helper.from_array(np.array([0.0]), "s"),
                 nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1],
                 nodes_falseleafs=[1], leaf_targetids=[0, 0],
                 leaf_weights=numpy_helper.from_array(np.array([1.0, 2.0]), "w"),
                 membership_values=numpy_helper.from_array(np.array([-1.5, 3.0, np.nan]), "v"))
    model = ensemble(attrs, np.float64, 1)
    x = np.array([[-1.5], [-1.0], [3.0], [3.5], [np.nan]])
    with pytest.raises(Exception, match="integers"):
        onnxruntime(model, {"X": x})
    (want,) = ReferenceEvaluator(model).run(None, {"X": x})
    np.testing.assert_array_equal(ours(model, {"X": x})[0], want)


# --- onnxruntime's quirks -------------------------------------------------------------------

STUMP = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
             nodes_values=[0.5, 0.0, 7.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
             nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
             target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0],
             target_weights=[-2.0, 3.0], n_targets=1)
QUIRKS = {
    "leaf without weight: its nodes_values entry": dict(target_treeids=[0], target_nodeids=[1],
                                                        target_ids=[0], target_weights=[-2.0]),
    "two weights on a leaf: the first": dict(target_treeids=[0, 0, 0], target_nodeids=[1, 1, 2],
                                             target_ids=[0, 0, 0], target_weights=[-2., 5., 3.]),
    "weight on a branch: ignored": dict(target_treeids=[0, 0, 0], target_nodeids=[0, 1, 2],
                                        target_ids=[0, 0, 0], target_weights=[9., -2., 3.]),
    "two targets, one never reached: 0 despite its base": dict(
        n_targets=2, target_ids=[0, 0], base_values=[10.0, 20.0]),
    "two targets, two weights on a leaf: both": dict(
        n_targets=2, target_treeids=[0, 0, 0, 0], target_nodeids=[1, 1, 2, 2],
        target_ids=[1, 1, 0, 1], target_weights=[0.1, 0.7, 3.0, 1e-9]),
    "root listed after its children": dict(nodes_nodeids=[2, 0, 1], nodes_truenodeids=[0, 0, 0],
                                           nodes_falsenodeids=[1, 0, 0], target_nodeids=[0, 1]),
    "a tree listed in two runs counts twice": dict(
        nodes_treeids=[0, 1, 0, 0, 1, 1], nodes_nodeids=[0, 0, 1, 2, 1, 2],
        nodes_featureids=[0] * 6, nodes_values=[0.5, 0.25, 0, 0, 0, 0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 1, 0, 0, 0, 0], nodes_falsenodeids=[2, 2, 0, 0, 0, 0],
        target_treeids=[0, 0, 1, 1], target_nodeids=[1, 2, 1, 2], target_ids=[0] * 4,
        target_weights=[1.0, 2.0, 10.0, 20.0]),
    "a shared true child": dict(
        nodes_treeids=[0] * 4, nodes_nodeids=[0, 1, 2, 3], nodes_featureids=[0] * 4,
        nodes_values=[0.5, -1.0, 0.0, 0.0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[2, 2, 0, 0], nodes_falsenodeids=[1, 3, 0, 0],
        target_treeids=[0, 0], target_nodeids=[2, 3]),
    "logistic on one target: not applied": dict(post_transform="LOGISTIC"),
    "probit on one target": dict(post_transform="PROBIT", target_weights=[0.2, 0.9]),
    "missing values tracked past the list's end are false": dict(
        nodes_missing_value_tracks_true=[1]),
    "an unreachable node's feature is not needed": dict(
        nodes_treeids=[0] * 4, nodes_nodeids=[0, 1, 2, 3], nodes_featureids=[0, 0, 0, 7],
        nodes_values=[0.5, 0.0, 0.0, 1.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT"],
        nodes_truenodeids=[1, 0, 0, 1], nodes_falsenodeids=[2, 0, 0, 2]),
}


@pytest.mark.parametrize("change", QUIRKS.values(), ids=QUIRKS.keys())
def test_quirks_of_onnxruntime(change, kernel_path):
    attrs = dict(STUMP, **change)
    targets = attrs["n_targets"]
    model = regressor(attrs, np.float32, targets)
    x = np.array([[0.0], [1.0], [np.nan], [-3.0]], np.float32)
    (want,) = onnxruntime(model, {"X": x})
    assert_scores(ours(model, {"X": x})[0], want)
    assert_scores(ours(model, {"X": x[:1]})[0], want[:1])  # the dense walk
    assert_scores(whole(model, {"X": x})[0], want)


def test_one_dimensional_input_is_one_row_of_one_feature():
    model = regressor(STUMP, np.float32, 1)
    x = np.array([0.25, 9.0, 9.0], np.float32)
    (want,) = onnxruntime(model, {"X": x})
    assert_scores(ours(model, {"X": x})[0], want)


# --- the other ops ------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [[3, 5, 1], ["b", "a", "b"]], ids=["int64", "strings"])
def test_zipmap_matches_onnxruntime(labels):
    strings = isinstance(labels[0], str)
    model = ml_model("ZipMap", {"classlabels_strings" if strings else "classlabels_int64s":
                                labels},
                     [("X", T.FLOAT, [None, 3])], [("Z", "map", T.STRING if strings else T.INT64)],
                     ml_opset=1)
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    (want,) = onnxruntime(model, {"X": x})
    (got,) = ours(model, {"X": x})
    assert got == want
    assert [list(row) for row in got] == [list(row) for row in want]  # keys sorted as there
    assert ours(model, {"X": x[0]})[0] == want[:1]  # a 1-d X is one row


def exact_linear(rng, outputs, features_count, rows):
    """Coefficients and inputs on a 1/8 grid: MLAS's float32 GEMM is then exact."""
    weights = rng.integers(-8, 9, (outputs, features_count)) / 4
    intercepts = rng.integers(-8, 9, outputs) / 8
    x = rng.integers(-16, 17, (rows, features_count)) / 8
    return weights, intercepts, x


LINEAR_CASES = [(1, 2, "int"), (1, 0, "int"), (1, 2, "str"), (3, 3, "int"), (4, 4, "str"),
                (6, 6, "int")]  # no labels: 0 and 1, int64


@pytest.mark.parametrize("classes,labels,kind", LINEAR_CASES)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_linear_classifier_matches_onnxruntime(classes, labels, kind, transform):
    if classes == 1 and labels == 2 and transform == "PROBIT":
        pytest.skip("refused: onnxruntime leaves half of Z unwritten (test_errors)")
    rng = np.random.default_rng(classes * 10 + TRANSFORMS.index(transform))
    weights, intercepts, x = exact_linear(rng, classes, 3, 40)
    attrs = dict(coefficients=weights.ravel().tolist(), intercepts=intercepts.tolist(),
                 post_transform=transform, multi_class=0)
    if labels:
        attrs["classlabels_strings" if kind == "str" else "classlabels_ints"] = \
            [f"l{k}" for k in range(labels)] if kind == "str" else list(range(5, 5 + labels))
    for dtype in (np.float32, np.float64, np.int64, np.int32):
        model = ml_model("LinearClassifier", attrs, [("X", ONNX_TYPE[dtype], [None, 3])],
                         [("Y", T.STRING if kind == "str" else T.INT64, [None]),
                          ("Z", T.FLOAT, [None, None])], ml_opset=1)
        feed = x.astype(dtype) if dtype in (np.float32, np.float64) else \
            np.round(x * 4).astype(dtype)
        want, got = onnxruntime(model, {"X": feed}), ours(model, {"X": feed})
        assert got[0].tolist() == want[0].tolist()
        assert_scores(got[1], want[1])


@pytest.mark.parametrize("features_count", [3, 40, 300])
def test_linear_gemm_follows_mlas_to_the_bit(features_count):
    """Random weights and inputs (sums that cancel): two rows or more equal MLAS's SGEMM to
    the bit, and its logistic; one row within the last bits."""
    rng = np.random.default_rng(features_count)
    weights = rng.normal(size=(4, features_count))
    attrs = dict(coefficients=weights.ravel().tolist(), intercepts=rng.normal(size=4).tolist(),
                 classlabels_ints=[0, 1, 2, 3])
    for transform in ("NONE", "LOGISTIC"):
        model = ml_model("LinearClassifier", dict(attrs, post_transform=transform),
                         [("X", T.FLOAT, [None, features_count])],
                         [("Y", T.INT64, [None]), ("Z", T.FLOAT, [None, 4])], ml_opset=1)
        x = rng.normal(size=(30, features_count)).astype(np.float32)
        want, got = onnxruntime(model, {"X": x}), ours(model, {"X": x})
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        want, got = onnxruntime(model, {"X": x[:1]}), ours(model, {"X": x[:1]})
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("targets", [1, 3, 6])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_linear_regressor_matches_onnxruntime(targets, transform):
    rng = np.random.default_rng(targets + TRANSFORMS.index(transform))
    weights, intercepts, x = exact_linear(rng, targets, 4, 30)
    for with_intercepts in (True, False):
        attrs = dict(coefficients=weights.ravel().tolist(), targets=targets,
                     post_transform=transform)
        if with_intercepts:
            attrs["intercepts"] = intercepts.tolist()
        model = ml_model("LinearRegressor", attrs, [("X", T.FLOAT, [None, 4])],
                         [("Y", T.FLOAT, [None, targets])], ml_opset=1)
        feed = x.astype(np.float32)
        (want,) = onnxruntime(model, {"X": feed})
        assert_scores(ours(model, {"X": feed})[0], want)
        assert_scores(whole(model, {"X": feed})[0], want)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_normalizer_matches_onnxruntime(norm, dtype):
    rng = np.random.default_rng(1)
    x = rng.normal(0, 3, (6, 5))
    x[1] = 0
    x[2] = -np.abs(x[2])
    x = np.round(x).astype(dtype) if np.dtype(dtype).kind == "i" else x.astype(dtype)
    model = ml_model("Normalizer", {"norm": norm}, [("X", ONNX_TYPE[dtype], None)],
                     [("Y", T.FLOAT, None)], ml_opset=1)
    for feed in (x, x[3]):
        (want,) = onnxruntime(model, {"X": feed})
        assert_scores(ours(model, {"X": feed})[0], want, exact=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_scaler_matches_onnxruntime(dtype):
    rng = np.random.default_rng(2)
    for shape, size in (((5, 3), 3), ((5, 3), 1), ((4,), 4), ((2, 2, 3), 2)):
        x = rng.normal(0, 5, shape)
        x = np.round(x).astype(dtype) if np.dtype(dtype).kind == "i" else x.astype(dtype)
        model = ml_model("Scaler", {"scale": rng.normal(size=size).tolist(),
                                    "offset": rng.normal(size=size).tolist()},
                         [("X", ONNX_TYPE[dtype], None)], [("Y", T.FLOAT, None)], ml_opset=1)
        (want,) = onnxruntime(model, {"X": x})
        assert_scores(ours(model, {"X": x})[0], want, exact=True)


def test_binarizer_matches_onnxruntime():
    x = np.array([[-1.0, 0.0, -0.0], [0.5, 1.0, 2.0]], np.float32)
    for attrs in ({}, {"threshold": 0.5}, {"threshold": -1.0}):
        model = ml_model("Binarizer", attrs, [("X", T.FLOAT, None)], [("Y", T.FLOAT, None)],
                         ml_opset=1)
        (want,) = onnxruntime(model, {"X": x})
        assert_scores(ours(model, {"X": x})[0], want, exact=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, object])
def test_array_feature_extractor_matches_onnxruntime(dtype):
    elem = T.STRING if dtype is object else ONNX_TYPE[dtype]
    model = ml_model("ArrayFeatureExtractor", {}, [("X", elem, None), ("Y", T.INT64, None)],
                     [("Z", elem, None)], ml_opset=1)
    for shape in ((5,), (3, 5), (2, 2, 5)):
        x = np.arange(np.prod(shape)).reshape(shape)
        x = x.astype(str).astype(object) if dtype is object else x.astype(dtype)
        for indices in (np.array([4, 0, 4]), np.array([[1], [3]])):
            (want,) = onnxruntime(model, {"X": x, "Y": indices})
            (got,) = ours(model, {"X": x, "Y": indices})
            assert got.shape == want.shape and got.tolist() == want.tolist()


# --- transforms, dispatch and the engine --------------------------------------------------

def test_score_transforms_follow_ml_common():
    x = np.array([-20.0, -0.5, -0.0, 0.0, 1e-8, 0.3, 2.0, 40.0, np.nan], np.float32)
    expected = np.float32(1) / (np.float32(1) + np.exp(-np.abs(x.astype(np.float64)))
                                .astype(np.float32))
    np.testing.assert_array_equal(compute_logistic(x),
                                  np.where(x < 0, np.float32(1) - expected, expected))
    probit = compute_probit(np.array([0.3, 0.5, 0.85], np.float32))
    np.testing.assert_allclose(probit, [-0.5244458913803101, 0.0, 1.0366135835647583],
                               rtol=1e-6, atol=1e-7)  # onnxruntime's values


def test_dispatch():
    tree = ml_model("TreeEnsembleRegressor", STUMP, [("X", T.FLOAT, [None, 1])],
                    [("Y", T.FLOAT, [None, 1])]).graph.node[0]
    assert isinstance(host_node(tree, FakeModel(), {}), TreeEnsembleRegressorNode)
    svm = h.make_node("SVMRegressor", ["X"], ["Y"], domain=ML, coefficients=[1.0],
                      support_vectors=[1.0], n_supports=1, rho=[0.0])
    assert ml_node(svm, FakeModel(), {}) is None
    assert isinstance(host_node(svm, FakeModel(), {}), ReferenceNode)
    assert ml_node(h.make_node("Relu", ["X"], ["Y"]), FakeModel(), {}) is None


def test_between_compiled_stages():
    """Standard ops before and after a tree ensemble and a linear model: the ensembles
    run on the host between compiled stages."""
    rng = np.random.default_rng(8)
    forest = random_trees(rng, trees=8, depth=4, columns=4, modes=("BRANCH_LEQ", "BRANCH_GT"))
    attrs = v3_attributes(forest, "target_")
    attrs.update(n_targets=1)
    nodes = [h.make_node("Mul", ["X", "two"], ["X2"]),
             h.make_node("TreeEnsembleRegressor", ["X2"], ["T"], domain=ML, **attrs),
             h.make_node("LinearRegressor", ["X2"], ["L"], domain=ML, targets=1,
                         coefficients=[0.5, -1.0, 0.25, 2.0], intercepts=[0.125]),
             h.make_node("Concat", ["T", "L"], ["C"], axis=1),
             h.make_node("Normalizer", ["C"], ["N"], domain=ML, norm="L2"),
             h.make_node("Add", ["N", "one"], ["Y"])]
    graph = h.make_graph(nodes, "mixed", [h.make_tensor_value_info("X", T.FLOAT, [None, 4])],
                         [h.make_tensor_value_info("Y", T.FLOAT, [None, 2])],
                         [numpy_helper.from_array(np.float32(2.0), "two"),
                          numpy_helper.from_array(np.float32(1.0), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(ML, 3)])
    model.ir_version = 8
    x = features(rng, 11, 4, nan=0.0)
    (want,) = onnxruntime(model, {"X": x})
    np.testing.assert_allclose(whole(model, {"X": x})[0], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("strings", [True, False], ids=["string labels", "int64 labels"])
def test_classifier_pipelines_run_whole(strings):
    """skl2onnx's shapes: Scaler, then a tree or linear classifier whose labels are a
    graph output and whose scores go through ZipMap (a sequence of maps)."""
    rng = np.random.default_rng(12)
    labels = ["neg", "mid", "pos"] if strings else [3, 5, 9]
    key = "classlabels_strings" if strings else "classlabels_int64s"
    forest = random_trees(rng, trees=6, depth=3, columns=4, modes=("BRANCH_LEQ",), targets=3,
                          weights=(1, 3))
    tree = dict(v3_attributes(forest, "class_"), post_transform="SOFTMAX", **{key: labels})
    linear = dict(coefficients=rng.normal(size=12).tolist(), intercepts=[0.1, 0.0, -0.1],
                  post_transform="LOGISTIC",
                  **{"classlabels_strings" if strings else "classlabels_ints": labels})
    label_type = T.STRING if strings else T.INT64
    for op, attrs in (("TreeEnsembleClassifier", tree), ("LinearClassifier", linear)):
        nodes = [h.make_node("Scaler", ["X"], ["scaled"], domain=ML, scale=[0.5] * 4,
                             offset=[0.25] * 4),
                 h.make_node(op, ["scaled"], ["label", "scores"], domain=ML, name=NODE, **attrs),
                 h.make_node("ZipMap", ["scores"], ["probabilities"], domain=ML, **{key: labels})]
        graph = h.make_graph(nodes, "pipeline", [h.make_tensor_value_info("X", T.FLOAT,
                                                                          [None, 4])],
                             [h.make_tensor_value_info("label", label_type, [None]),
                              value_info("probabilities", "map", label_type)])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                                   h.make_opsetid(ML, 3)])
        model.ir_version = 8
        x = features(rng, 7, 4, nan=0.0)
        want, got = onnxruntime(model, {"X": x}), whole(model, {"X": x})
        assert got[0].tolist() == want[0].tolist()
        assert len(got[1]) == len(want[1])
        for row, expected in zip(got[1], want[1], strict=True):
            assert list(row) == list(expected)
            np.testing.assert_allclose(list(row.values()), list(expected.values()), rtol=1e-6)


@pytest.mark.parametrize("key", ATSPM)
def test_atspm_lightgbm_models_to_the_bit(key, kernel_path):
    from openacl.cli.zoo import cached

    path = cached(key)
    if path is None:
        pytest.skip(f"the zoo model {key} is not cached: openacl fetch {key}")
    rng = np.random.default_rng(0)
    model = onnx.load(str(path))
    columns = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    session = InferenceSession(str(path))
    try:
        for rows in (1, 64):
            x = rng.normal(0, 2, (rows, columns))
            x[rng.random(x.shape) < 0.05] = np.nan
            (want,) = onnxruntime(model, {"X": x})
            np.testing.assert_array_equal(session.run(None, {"X": x})[0], want)
    finally:
        session.close()


# --- the C walk (openacl._native.tree_leaves) against the numpy walks -----------------------

# features the RAW_TRUNC comparison treats specially: out of int32 (INT32_MIN), its edges
WALK_SPECIALS = np.array([np.inf, -np.inf, 3e9, -3e9, -2147483648.0, -2147483648.5,
                          2147483647.5, 2147483648.0, -0.0, 40.9, -1.9, 0.99])
ORDERED_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT")
WALK_MODES = {**{mode[7:]: (mode,) for mode in V3_MODES}, "ordered": ORDERED_MODES,
              "every": V3_MODES}


def tree_kernel():
    """``_native.tree_leaves``'s module, or a skip where the extension is not there."""
    lib = native.kernels()
    if lib is None or not hasattr(lib, "tree_leaves"):
        pytest.skip("openacl._native (with tree_leaves) is not built, or it is turned off")
    return lib


def walk_features(rng, rows, columns, dtype):
    x = features(rng, rows, columns, dtype)
    special = rng.random(x.shape) < 0.05
    x[special] = rng.choice(WALK_SPECIALS, special.sum()).astype(dtype)
    return x


def with_nan_thresholds(rng, forest, share=0.1):
    """Some ordered splits' thresholds made NaN (a RAW kind: false but for tracked NaNs)."""
    for nodes in forest:
        for position, node in enumerate(nodes):
            if node[0] == "branch" and node[1] in ORDERED_MODES and rng.random() < share:
                nodes[position] = (*node[:3], float("nan"), *node[4:])
    return forest


def assert_walks_agree(model, dtype, rng, columns, row_counts=(1, 2, 3, 9, 200)):
    """The leaves of the C walk equal the numpy walks' (dense up to DENSE_MAX_ROWS rows,
    the lanes above), and so do the node's outputs, to the bit."""
    runner = runner_of(model)
    forest, _ = runner._compiled_for(runner.threshold_dtype(np.dtype(dtype)))
    assert forest.native_records is not None
    for rows in row_counts:
        x = walk_features(rng, rows, columns, dtype)
        got, outputs = forest.leaves(x), runner.run({"X": x})
        with native.disabled():
            want, expected = forest.leaves(x), runner.run({"X": x})
        assert got.dtype == want.dtype and got.shape == want.shape == (rows, forest.roots.size)
        np.testing.assert_array_equal(got, want)
        for name, value in expected.items():
            np.testing.assert_array_equal(outputs[name], value)
    return forest


WALK_CASES = [(name, dtype, depth) for name in WALK_MODES for dtype in (np.float32, np.float64)
              for depth in (0, 1, 12)]


@pytest.mark.parametrize("name,dtype,depth", WALK_CASES,
                         ids=[f"{n}-{np.dtype(d).name}-depth{k}" for n, d, k in WALK_CASES])
def test_c_walk_equals_the_numpy_walk(name, dtype, depth):
    """Every mode (the ordered ones, flipped where missing values track true, are the fast
    ``<=`` kind; EQ, NEQ and NaN thresholds are RAW kinds), float and double thresholds,
    NaN and out-of-int32 features, one-leaf trees, stumps and deep trees, 1 to 200 rows."""
    tree_kernel()
    rng = np.random.default_rng(zlib.crc32(repr((name, np.dtype(dtype).name, depth)).encode()))
    forest = random_trees(rng, trees=40, depth=depth, columns=7, modes=WALK_MODES[name],
                          targets=2, track=0.4, weights=(1, 2), leaf_share=0.35)
    if name in ("ordered", "every"):
        with_nan_thresholds(rng, forest)
    attrs = v3_attributes(forest, "target_", double=dtype == np.float64, permute=rng)
    attrs.update(n_targets=2)
    compiled = assert_walks_agree(regressor(attrs, dtype, 2), dtype, rng, 7)
    assert compiled.depth == depth if depth < 2 else compiled.depth >= 8
    raw = any(node[0] == "branch" and (node[1] in ("BRANCH_EQ", "BRANCH_NEQ") or
                                       np.isnan(node[3])) for nodes in forest for node in nodes)
    assert compiled.raw == raw  # (the C walk's RAW kinds where there are any)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("depth", [1, 10])
def test_c_walk_equals_the_numpy_walk_on_member_sets(dtype, depth):
    """Opset 5's BRANCH_MEMBER chains: sets compared exactly (within [0, 30]) and as
    truncated int32 values (RAW_TRUNC), beside every other mode."""
    tree_kernel()
    rng = np.random.default_rng(depth * 2 + (dtype == np.float64))
    forest = random_trees(rng, trees=30, depth=depth, columns=6, modes=(*V3_MODES, "MEMBER"),
                          track=0.4, leaf_share=0.2)
    model = ensemble(v5_attributes(forest, dtype, 1), dtype, 1)
    compiled = assert_walks_agree(model, dtype, rng, 6)
    assert (compiled.kind == host_ml.RAW_TRUNC).any() and (compiled.kind == host_ml.RAW_EQ).any()


@pytest.mark.parametrize("modes", [ORDERED_MODES, V3_MODES], ids=["ordered", "every"])
def test_c_walk_splits_over_the_pool(modes):
    """Enough lanes that the walk runs as tasks on the pool (and, with one thread, on the
    caller): the same leaves as the numpy walk either way."""
    lib = tree_kernel()
    rng = np.random.default_rng(len(modes))
    forest = random_trees(rng, trees=200, depth=8, columns=12, modes=modes, track=0.4,
                          leaf_share=0.3)
    attrs = v3_attributes(forest, "target_", double=True)
    attrs.update(n_targets=1)
    model = regressor(attrs, np.float64, 1)
    before = lib.pool_threads()
    try:
        for threads in (1, 3):
            lib.pool_threads(threads)
            compiled = assert_walks_agree(model, np.float64, rng, 12, row_counts=(1, 64))
    finally:
        lib.pool_threads(before)
    assert 64 * compiled.roots.size * (compiled.depth + 1) >= 32768  # _native.c's threshold


def test_compiled_slots_are_checked_once():
    """The indices the C walk follows are checked when the forest is compiled: a slot that
    would lead outside the arrays is an internal error naming it."""
    runner = runner_of(regressor(dict(STUMP), np.float32, 1))
    forest, _ = runner._compiled_for(np.dtype(np.float32))
    forest.slot_base = forest.slot_base.copy()
    forest.slot_base[0] = forest.slot_base.size - 1  # its pair would end past the slots
    with pytest.raises(AclError) as info:
        forest._native_slots(runner)
    assert info.value.code == ACL_ERROR_INTERNAL_ERROR and "slot 0 of 3" in info.value.message


# --- _native.tree_leaves called directly: its argument checks ------------------------------

def stump_slots(dtype, bound=0.5):
    """One tree: slot 0 compares column 0 with ``bound``; slots 1 (the second child: leaf 0)
    and 2 (the first: leaf 1) point to themselves and read column 1, the NaN column."""
    records = np.zeros(3, host_ml.SLOT_RECORDS[np.dtype(dtype)])
    records["bound"], records["column"], records["next"] = [bound, 0, 0], [0, 1, 1], [1, 1, 2]
    return records, np.array([-1, 0, 1], np.int32)


def stump_call(dtype=np.float64, **change):
    records, leaves = stump_slots(dtype)
    rows = np.array([[0.3, np.nan], [0.7, np.nan], [np.nan, np.nan], [0.5, np.nan]], dtype)
    call = dict(rows=rows, slots=records.view(np.int32), leaves=leaves, kinds=None,
                out=np.full((4, 1), -7, np.intp), sizes=(4, 2, 1, 1))
    call.update(change)
    return call


def tree_leaves(lib, call):
    lib.tree_leaves(call["rows"], call["slots"], call["leaves"], call["kinds"], call["out"],
                    call["sizes"])
    return call["out"].ravel().tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_leaves_walks_a_stump(dtype):
    lib = tree_kernel()
    assert tree_leaves(lib, stump_call(dtype)) == [1, 0, 0, 1]  # x <= 0.5; NaN: second
    raw_eq = host_ml.RAW_EQ | host_ml.RAW_TRACK  # x == 0.5, or NaN
    kinds = np.array([raw_eq, 0, 0], np.int8)
    assert tree_leaves(lib, stump_call(dtype, kinds=kinds)) == [0, 0, 1, 1]
    assert tree_leaves(lib, stump_call(dtype, sizes=(0, 2, 1, 1))) == [-7] * 4  # no rows


def _records(change):
    """A double stump's records changed by ``change`` (field -> values), as int32."""
    records, _ = stump_slots(np.float64)
    for field, values in change.items():
        records[field] = values
    return records.view(np.int32)


def _misaligned(slots):
    """``slots`` copied to an address 4 bytes past an 8-byte boundary."""
    base = np.zeros(slots.size + 2, np.int32)
    start = 1 if base.ctypes.data % 8 == 0 else 0
    view = base[start:start + slots.size]
    view[:] = slots
    return view


BAD_WALK_CALLS = {
    "int64 rows": (lambda c: dict(rows=np.zeros((4, 2), np.int64)), TypeError,
                   "'rows' must be a float32 or float64"),
    "float16 rows": (lambda c: dict(rows=c["rows"].astype(np.float16)), TypeError, "'rows'"),
    "rows not contiguous": (lambda c: dict(rows=np.asfortranarray(c["rows"])),
                            (ValueError, BufferError), "contiguous"),
    "float slots": (lambda c: dict(slots=c["slots"].view(np.float32)), TypeError, "int32"),
    "slots not whole records": (lambda c: dict(slots=c["slots"][:-1]), ValueError,
                                "whole float64 slots"),
    "float32 rows, float64 records": (lambda c: dict(rows=c["rows"].astype(np.float32)),
                                      ValueError, "one per slot"),
    "misaligned slots": (lambda c: dict(slots=_misaligned(c["slots"])), ValueError,
                         "aligned"),
    "int64 leaves": (lambda c: dict(leaves=c["leaves"].astype(np.int64)), TypeError, "int32"),
    "short leaves": (lambda c: dict(leaves=c["leaves"][:2]), ValueError, "one per slot"),
    "int32 kinds": (lambda c: dict(kinds=np.zeros(3, np.int32)), TypeError, "int8"),
    "short kinds": (lambda c: dict(kinds=np.zeros(2, np.int8)), ValueError, "one per slot"),
    "int32 out": (lambda c: dict(out=np.zeros((4, 1), np.int32)), TypeError, "int64"),
    "read-only out": (lambda c: dict(out=np.zeros((4, 1), np.intp).view()),
                      (ValueError, BufferError, TypeError), "read-only|writable"),
    "short out": (lambda c: dict(out=np.zeros(3, np.intp)), ValueError, "'out' holds 3"),
    "short rows": (lambda c: dict(sizes=(5, 2, 1, 1), out=np.zeros(5, np.intp)), ValueError,
                   "'rows' holds 8 values, 10 needed"),
    "more trees than slots": (lambda c: dict(sizes=(1, 2, 4, 1)), ValueError,
                              "4 trees but 3 slots"),
    "negative rows": (lambda c: dict(sizes=(-1, 2, 1, 1)), ValueError, "width must be"),
    "no columns": (lambda c: dict(sizes=(4, 0, 1, 1)), ValueError, "width must be"),
    "negative steps": (lambda c: dict(sizes=(4, 2, 1, -1)), ValueError, "width must be"),
    "sizes that overflow": (lambda c: dict(sizes=(2 ** 40, 2 ** 30, 1, 1)), OverflowError,
                            "overflow"),
    "a column out of the row": (lambda c: dict(slots=_records({"column": [2, 1, 1]})),
                                ValueError, "tree 0, row 0: a slot reads a column out of"),
    "a next slot out of range": (lambda c: dict(slots=_records({"next": [2, 1, 2]})),
                                 ValueError, "leads out of \\[0, 3\\) slots"),
    "a negative next slot": (lambda c: dict(slots=_records({"next": [-5, 1, 2]})),
                             ValueError, "leads out of"),
    "a cycle": (lambda c: dict(slots=_records({"bound": [0.5, -np.inf, 0],  # 0 -> 1 -> 0
                                               "next": [0, 0, 2]}),
                               sizes=(4, 2, 1, 50)),
                ValueError, "tree 0, row 0 is at no leaf after 50 steps"),
    "a branch slot that stays": (lambda c: dict(slots=_records({"next": [-1, 1, 2]}),
                                                sizes=(1, 2, 1, 1)),  # 0.3 <= 0.5: -1 + 1
                                 ValueError, "row 0 is at no leaf after 1 steps"),
    "fewer steps than the depth": (lambda c: dict(sizes=(4, 2, 1, 0)), ValueError,
                                   "at no leaf after 0 steps"),
}


@pytest.mark.parametrize("change,error,expected", BAD_WALK_CALLS.values(),
                         ids=BAD_WALK_CALLS.keys())
def test_tree_leaves_refuses_bad_arguments(change, error, expected):
    """Wrong types, shapes and lengths are refused before the walk; malformed slots (out of
    range, a cycle, a lane short of its leaf) stop it with the lane named; never a crash."""
    lib = tree_kernel()
    call = stump_call()
    call.update(change(call))
    if "read-only" in expected:
        call["out"].flags.writeable = False
    with pytest.raises(error, match=expected):
        tree_leaves(lib, call)


# --- errors -------------------------------------------------------------------------------

def error_of(model, feeds=None):
    with pytest.raises(AclError) as info:
        runner = runner_of(model)
        runner.run(feeds or {})
    assert NODE in info.value.message and model.graph.node[0].op_type in info.value.message
    return info.value


BAD_TREES = {
    "a node that does not exist": (dict(nodes_treeids=[0, 0, 1], target_treeids=[0, 1]),
                                   "node 2 of tree 0 does not exist"),
    "a child id out of range": (dict(nodes_truenodeids=[5, 0, 0]), "must be in [0, 3)"),
    "mismatched lengths": (dict(nodes_featureids=[0, 0]), "one length"),
    "mismatched weight lengths": (dict(target_weights=[1.0]), "one length"),
    "an unknown mode": (dict(nodes_modes=["BRANCH_XX", "LEAF", "LEAF"]), "'BRANCH_XX'"),
    "a node its own child": (dict(nodes_truenodeids=[0, 0, 0]), "own true child"),
    "a node listed twice": (dict(nodes_nodeids=[0, 1, 1]), "listed twice"),
    "a weight on a missing node": (dict(target_nodeids=[1, 9]), "does not exist"),
    "a target id out of range": (dict(target_ids=[0, 1]), "[0, 1)"),
    "base values of a wrong length": (dict(base_values=[1.0, 2.0]), "base_values"),
    "a negative feature": (dict(nodes_featureids=[-1, 0, 0]), "nodes_featureids[0]"),
    "an unknown aggregate": (dict(aggregate_function="MEDIAN"), "'MEDIAN'"),
    "an unknown transform": (dict(post_transform="TANH"), "'TANH'"),
    "both values and their tensor": (dict(nodes_values_as_tensor=numpy_helper.from_array(
        np.zeros(3, np.float32), "v")), "only one"),
    "an unknown attribute": (dict(nodes_colour=[1, 2, 3]), "'nodes_colour'"),
    "a shared false child": (dict(
        nodes_treeids=[0] * 4, nodes_nodeids=[0, 1, 2, 3], nodes_featureids=[0] * 4,
        nodes_values=[0.5, -1.0, 0.0, 0.0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 3, 0, 0], nodes_falsenodeids=[2, 2, 0, 0],
        target_treeids=[0, 0], target_nodeids=[2, 3]), "shared false child"),
    "a cycle": (dict(
        nodes_treeids=[0] * 4, nodes_nodeids=[0, 1, 2, 3], nodes_featureids=[0] * 4,
        nodes_values=[0.5, -1.0, 0.0, 0.0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0, 0], nodes_falsenodeids=[2, 3, 0, 0],
        target_treeids=[0, 0], target_nodeids=[2, 3]), "cycle"),
}


@pytest.mark.parametrize("change,expected", BAD_TREES.values(), ids=BAD_TREES.keys())
def test_bad_tree_attributes(change, expected):
    error = error_of(regressor(dict(STUMP, **change), np.float32, 1))
    assert error.code == ACL_ERROR_PARSE_MODEL and expected in error.message


def _v5(**change):
    attrs = dict(n_targets=1, tree_roots=[0], nodes_featureids=[0],
                 nodes_modes=numpy_helper.from_array(np.array([0], np.uint8), "m"),
                 nodes_splits=numpy_helper.from_array(np.array([0.5]), "s"),
                 nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1],
                 nodes_falseleafs=[1], leaf_targetids=[0, 0],
                 leaf_weights=numpy_helper.from_array(np.array([1.0, 2.0]), "w"))
    attrs.update(change)
    return ensemble(attrs, np.float64, 1)


BAD_V5 = {
    "an unknown mode": (dict(nodes_modes=numpy_helper.from_array(np.array([7], np.uint8),
                                                                 "m")), "nodes_modes[0] is 7"),
    "an unknown transform": (dict(post_transform=5), "post_transform is 5"),
    "an unknown aggregate": (dict(aggregate_function=4), "aggregate_function is 4"),
    "an empty membership set": (dict(
        nodes_modes=numpy_helper.from_array(np.array([6], np.uint8), "m"),
        membership_values=numpy_helper.from_array(np.array([np.nan]), "v")),
        "no membership value"),
    "a leaf index out of range": (dict(nodes_falsenodeids=[4]), "leaf index out of [0, 2)"),
    "a shared branch node": (dict(tree_roots=[0, 0]), "reached twice"),

    "weights of another type": (dict(leaf_weights=numpy_helper.from_array(
        np.array([1.0, 2.0], np.float32), "w")), "one type"),
    "mismatched lengths": (dict(nodes_featureids=[0, 0]), "one length"),
    "a target id out of range": (dict(leaf_targetids=[0, 1]), "[0, 1)"),
    "no targets": (dict(n_targets=0), "n_targets is 0"),
}


@pytest.mark.parametrize("change,expected", BAD_V5.values(), ids=BAD_V5.keys())
def test_bad_tree_ensemble_attributes(change, expected):
    error = error_of(_v5(**change))
    assert error.code == ACL_ERROR_PARSE_MODEL and expected in error.message


BAD_RUNS = {
    "a 3-d input": (np.zeros((1, 1, 1), np.float32), "1-d or 2-d"),
    "a scalar input": (np.float32(1.0), "1-d or 2-d"),
    "too few features": (np.zeros((2, 1), np.float32), "needs 3 columns"),
    "an int input (no onnxruntime kernel)": (np.zeros((2, 3), np.int64), "must be one of"),
}


@pytest.mark.parametrize("x,expected", BAD_RUNS.values(), ids=BAD_RUNS.keys())
def test_bad_tree_inputs(x, expected):
    error = error_of(regressor(dict(STUMP, nodes_featureids=[2, 0, 0]), np.float32, 1),
                     {"X": x})
    assert error.code == ACL_ERROR_INVALID_PARAM and expected in error.message and "'X'" \
        in error.message


def test_double_tensor_thresholds_want_a_double_input():
    attrs = dict(STUMP, nodes_values_as_tensor=numpy_helper.from_array(
        np.array([0.5, 0, 0]), "v"))
    del attrs["nodes_values"]
    model = regressor(attrs, np.float64, 1)
    error = error_of(model, {"X": np.zeros((1, 1), np.float32)})
    assert error.code == ACL_ERROR_INVALID_PARAM and "nodes_values_as_tensor" in error.message
    runner_of(model).run({"X": np.zeros((1, 1))})  # a double input is fine


BAD_CLASSIFIERS = {
    "no labels": (dict(), "exactly one of"),
    "both label lists": (dict(classlabels_int64s=[1, 2], classlabels_strings=["a", "b"]),
                         "exactly one of"),
    "one string label": (dict(classlabels_strings=["a"]), "one string label"),
    "base values of 3 classes": (dict(classlabels_int64s=[1, 2, 3], base_values=[0.1, 0.2]),
                                 "0 or 3"),
    "an aggregate": (dict(classlabels_int64s=[1, 2], aggregate_function="SUM"),
                     "'aggregate_function'"),
}


@pytest.mark.parametrize("change,expected", BAD_CLASSIFIERS.values(),
                         ids=BAD_CLASSIFIERS.keys())
def test_bad_classifier_attributes(change, expected):
    attrs = {k.replace("target_", "class_"): v for k, v in STUMP.items() if k != "n_targets"}
    error = error_of(classifier(dict(attrs, **change), np.float32, 2))
    assert error.code == ACL_ERROR_PARSE_MODEL and expected in error.message


BAD_OTHERS = [
    ("LinearClassifier", dict(coefficients=[1.0], intercepts=[0.0], classlabels_ints=[1, 2],
                              post_transform="PROBIT"), None, ACL_ERROR_PARSE_MODEL,
     "half of its scores"),
    ("LinearClassifier", dict(coefficients=[1.0], intercepts=[0.0],
                              classlabels_ints=[1, 2, 3]), None, ACL_ERROR_PARSE_MODEL, "3 labels"),
    ("LinearClassifier", dict(coefficients=[1.0, 2.0], intercepts=[0.0, 1.0],
                              classlabels_ints=[1, 2]), np.zeros((2, 3), np.float32),
     ACL_ERROR_INVALID_PARAM, "6 coefficients"),
    ("LinearRegressor", dict(coefficients=[1.0]), np.zeros((2, 1)), ACL_ERROR_INVALID_PARAM,
     "float32"),
    ("Normalizer", dict(norm="L3"), None, ACL_ERROR_PARSE_MODEL, "'L3'"),
    ("Normalizer", dict(norm="L1"), np.zeros((1, 2, 3), np.float32), ACL_ERROR_INVALID_PARAM,
     "1-d or 2-d"),
    ("Scaler", dict(scale=[1.0, 2.0]), None, ACL_ERROR_PARSE_MODEL, "offset 0"),
    ("Scaler", dict(scale=[1.0, 2.0], offset=[0.0, 0.0]), np.zeros((2, 3), np.float32),
     ACL_ERROR_INVALID_PARAM, "they must have 3"),
    ("Binarizer", dict(), np.array([0.0, np.nan], np.float32), ACL_ERROR_INVALID_PARAM,
     "flat index 1"),
    ("ZipMap", dict(classlabels_int64s=[1, 2]), np.zeros((2, 3), np.float32),
     ACL_ERROR_INVALID_PARAM, "[N, 2]"),
    ("ZipMap", dict(), None, ACL_ERROR_PARSE_MODEL, "exactly one of"),
]


@pytest.mark.parametrize("op,attrs,x,code,expected", BAD_OTHERS,
                         ids=[f"{case[0]}-{case[4]}" for case in BAD_OTHERS])
def test_bad_other_ops(op, attrs, x, code, expected):
    model = ml_model(op, attrs, [("X", T.FLOAT, None)], [("Y", T.FLOAT, None)], ml_opset=1)
    error = error_of(model, {"X": x})
    assert error.code == code and expected in error.message


@pytest.mark.parametrize("indices,expected", [(np.array([-1, 0]), "[0, 3)"),
                                              (np.array([3]), "[0, 3)"),
                                              (np.zeros(0, np.int64), "at least one"),
                                              (np.array([0], np.int32), "int64")])
def test_bad_feature_indices(indices, expected):
    model = ml_model("ArrayFeatureExtractor", {}, [("X", T.FLOAT, None), ("Y", T.INT64, None)],
                     [("Z", T.FLOAT, None)], ml_opset=1)
    error = error_of(model, {"X": np.zeros((2, 3), np.float32), "Y": indices})
    assert error.code == ACL_ERROR_INVALID_PARAM and expected in error.message


def test_a_row_without_any_class_weight_fails_as_in_onnxruntime():
    attrs = {k.replace("target_", "class_"): v for k, v in STUMP.items() if k != "n_targets"}
    attrs.update(class_treeids=[0], class_nodeids=[1], class_ids=[2], class_weights=[0.3],
                 classlabels_int64s=[1, 2, 3])
    model = classifier(attrs, np.float32, 3)
    with pytest.raises(Exception, match="narrowing"):
        onnxruntime(model, {"X": np.array([[1.0]], np.float32)})
    error = error_of(model, {"X": np.array([[1.0]], np.float32)})
    assert error.code == ACL_ERROR_INVALID_PARAM and "row 0" in error.message
