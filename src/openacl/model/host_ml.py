"""The ONNX-ML ops (domain ``ai.onnx.ml``) run on the host with numpy, as onnxruntime runs them.

``ml_node(node, model, constants)`` returns the host runner of an ``ai.onnx.ml`` node this
module implements, or None (``host_nodes.host_node`` then falls back to onnx's reference
evaluator: the SVMs, LabelEncoder, Imputer, OneHotEncoder, CategoryMapper, DictVectorizer,
FeatureVectorizer, CastMap). A runner is a ``host_nodes._HostNode``: ``run(env)`` returns the
node's outputs by name; a failure is an AclError naming the node.

Design note (invariants)
------------------------
* The reference is onnxruntime's CPU kernels (``providers/cpu/ml``: ``tree_ensemble_common.h``,
  ``tree_ensemble_aggregator.h``, ``tree_ensemble_attribute.h``, ``tree_ensemble.cc``,
  ``tree_ensemble_classifier.cc``, ``tree_ensemble_regressor.cc``, ``ml_common.h``,
  ``zipmap.cc``, ``linearclassifier.cc``, ``linearregressor.cc``, ``normalizer.cc``,
  ``scaler.cc``, ``binarizer.cc``, ``array_feature_extractor.cc``), checked against
  onnxruntime 1.32, not the ops' prose: where they differ (the opset-5 ``post_transform``
  numbers, a binary classifier's labels and scores, a target no leaf reached) onnxruntime's
  result is the one produced, and the few places where onnxruntime writes memory it never
  initialises or reads out of bounds are refused or named below.
* Attributes are read and checked once, when the runner is built (an AclError
  ``ACL_ERROR_PARSE_MODEL`` naming the node and the attribute, for what onnxruntime refuses
  when it loads the model); inputs are checked on every run (``ACL_ERROR_INVALID_PARAM``
  naming the input, its dtype and shape, and what it must be).
* Tree ensembles. onnxruntime compares a feature of the input type with a threshold of the
  threshold type by C++'s promotions: the threshold type is double for a double input (and
  an opset-5 double ensemble), else float, and an int32/int64 feature is converted to float
  first. Scores are summed in the threshold type, tree after tree in the order of the roots,
  each leaf's weights in the order of the attributes (its ``ScoreValue``); the sum is exact
  here for every row because numpy's ``add.accumulate`` is that same sequential sum. (An
  onnxruntime session with several intra-op threads splits the trees of more than 50 rows,
  or of one row with more than 80 trees, between its threads and adds the partial sums: the
  order, hence the last bits, then follow the thread count; compare with one thread.)
* The trees are compiled once per threshold type into flat arrays, and every (row, tree)
  pair is a lane that steps down one level per vectorised step. Every comparison becomes
  ``s * x <= t``: with ``s = -1`` (the negated features, stored beside the row) and
  ``t`` moved to the next float below for strict comparisons, LEQ/LT/GTE/GT all take one
  ``<=``; a node whose missing values go to the true side is flipped (the opposite
  comparison, the children swapped), so that a NaN, false in every ``<=``, always takes
  the second child. EQ, NEQ, NaN thresholds and BRANCH_MEMBER sets are compared as
  onnxruntime compares them (``RAW`` kinds): a set of values all within [0, 30] exactly,
  any other set of int32 values against ``int32(x)``, truncated (a set onnxruntime refuses,
  with a non-integer outside [0, 30], exactly, as ONNX says: ``_member_chains``).
  Children are stored as the pair (second, first) of *slots*, so a step is ``slot =
  base[slot] + (s * x <= t)``; a node with several parents (onnxruntime accepts a shared
  true child in opsets 1-3; a BRANCH_MEMBER set is a chain of equalities sharing its true
  child here) is one slot per parent, its subtree once. A leaf slot points to itself and
  reads a NaN column, so a finished lane stays; once a quarter of the lanes stopped moving
  they are dropped, and the walk ends when all have. One or two rows instead compare every
  branch node at once and then follow pointers (``DENSE_MAX_ROWS``).
* Where the C kernels are built and on (``openacl.ops.native``), the same slots are walked
  by ``_native.tree_leaves`` instead, every kind included: each lane runs to its leaf (a
  handful of lanes side by side, lanes split over the pool's threads when there are
  enough), from one record per slot (bound, column, next: ``SLOT_RECORDS``) that
  ``_Forest._native_slots`` builds once, checking every index the walk follows (a column
  inside the row, a branch slot's pair and a leaf's self-pointer inside the slots), and
  at most ``depth`` steps a lane. It only chooses the leaves, so the scores (summed here,
  as above) are the same to the bit; the numpy walk is the fallback (``OPENACL_NATIVE=0``,
  ``native.disabled()``, no C compiler).
* onnxruntime's quirks kept: a tree's root is the first node listed of each run of equal
  tree ids (a tree listed in two runs counts twice); a leaf without a weight scores its
  ``nodes_values`` entry when there is one target (and only the first weight of a leaf
  counts then); a target that no leaf of the row reached is 0 in the output whatever its
  base value; one-target regressors apply PROBIT only; the classifier always sums; its
  binary rules (``_binary_classes``), including the labels 1/0 it returns for two classes
  that both carry weights, and the one-class classifier's 1/0; opset 5 has no one-leaf
  tree (a root is a branch node, whose two children may be one leaf) and refuses a branch
  node reached twice. Not reproduced: where onnxruntime leaves a second score column
  unwritten (a one-column binary score that is neither logistic nor doubled: 0 here), and
  the score a one-class classifier with two base values writes past its row (only the
  first, the one onnxruntime keeps, is computed).
* Score transforms (``ml_common.h``) run in float32 as onnxruntime's do: LOGISTIC
  ``1 / (1 + exp(-|x|))``, SOFTMAX with a float sum, SOFTMAX_ZERO (its division in the
  threshold type), PROBIT by onnxruntime's ``ErfInv`` approximation; ``expf``/``logf`` are
  float64 results rounded once, glibc's but for rare last bits. The linear models'
  transforms go through MLAS: LOGISTIC is ``host_contrib.mlas_logistic`` (bit for bit),
  SOFTMAX of 5 classes or more (or of many rows) is MLAS's, approximated here within a few
  ulps; their GEMM follows MLAS's SGEMM kernel (a fused multiply-add per feature, in
  order) for two rows or more, bit for bit; one row (MLAS's single-row kernel, whose lane
  order is not reproduced) is summed in float64 and rounded once, within the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_INTERNAL_ERROR,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_MODEL,
)
from openacl.model.host_nodes import _HostNode
from openacl.ops import native

__all__ = ["ML_DOMAIN", "ML_OPS", "ml_node"]

ML_DOMAIN = "ai.onnx.ml"
F32 = np.float32
F64 = np.float64
INTP = np.intp
FLT_MAX = float(np.finfo(np.float32).max)

DENSE_MAX_ROWS = 2  # rows up to which a tree ensemble compares every node at once
COMPACT_FROM = 2  # the first step after which lanes at their leaf are looked for
COMPACT_SHARE = 0.25  # share of lanes at their leaf from which they are dropped
GEMM_SEQUENTIAL_MAX_FEATURES = 4096  # features up to which MLAS's SGEMM order is followed
SOFTMAX_ZERO_EPSILON = F32(1e-7)  # |score| up to it is "zero" to SOFTMAX_ZERO (ml_common.h)
ERFINV_A = F32(0.147)  # ErfInv's constant (ml_common.h)
ERFINV_C1 = F32(2) / (F32(math.pi) * ERFINV_A)  # 2 / (pi * a), folded in float32
ERFINV_C2 = F32(1) / ERFINV_A
SQRT2 = F32(math.sqrt(2.0))
# MLAS's softmax takes over from ComputeSoftmax above these scores per call (ml_common.h's
# batched_update_scores_inplace), by classes per row; 5 classes and more: always
MLAS_SOFTMAX_MIN_SCORES = {1: None, 2: 32 * 1024, 3: 16 * 1024, 4: 16 * 1024}

# post transforms: names of opsets 1-3, and opset 5's numbers as onnxruntime reads them
# (its POST_EVAL_TRANSFORM enum: 1 is LOGISTIC and 2 SOFTMAX, not the spec's order)
TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # opset 5's numbers are these positions

# node modes: onnxruntime's names (opsets 1-3) and opset 5's numbers (BRANCH_MEMBER = 6)
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER, LEAF = range(8)
TRUNC_EQ = 8  # internal: int32(x) == t, an element of a BRANCH_MEMBER set (_member_chains)
MEMBER_EXACT = (0, 30)  # onnxruntime compares x exactly with a set within this range
INT32_MIN, INT32_LIMIT = -2.0 ** 31, 2.0 ** 31  # x86's cvttsd2si: out of range -> INT32_MIN
MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT,
              "BRANCH_EQ": EQ, "BRANCH_NEQ": NEQ, "LEAF": LEAF}
NEGATED = np.array([GT, GTE, LT, LEQ], np.int8)  # not (x LEQ t) is x GT t, ...: LEQ..GT
LEQ_FORM, RAW_EQ, RAW_NEQ, RAW_TRUNC = 0, 1, 2, 3  # how a slot compares (the design note)
RAW_TRACK = 4  # or'ed to a RAW kind in the C walk's kinds: the comparison is true for NaN
# the C walk's slot records (_native.c's TreeSlotFloat/TreeSlotDouble): bound, column, next
SLOT_RECORDS = {np.dtype(dtype): np.dtype([("bound", dtype), ("column", np.int32),
                                           ("next", np.int32)]) for dtype in (F32, F64)}
SLOT_INDEX_LIMIT = 2 ** 31 - 1  # slots and columns the C walk's int32 indices can hold

TREE_INPUTS = {  # the input dtypes onnxruntime registers a kernel for
    "TreeEnsembleRegressor": (np.dtype(F32), np.dtype(F64)),
    "TreeEnsembleClassifier": (np.dtype(F32), np.dtype(F64), np.dtype(np.int64),
                               np.dtype(np.int32)),
}
NUMERIC_INPUTS = (np.dtype(F32), np.dtype(F64), np.dtype(np.int64), np.dtype(np.int32))


def ml_node(node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> Any:
    """The host runner of the ``ai.onnx.ml`` node ``node`` (of the StagedModel ``model``),
    or None when this module does not implement its op."""
    kind = ML_OPS.get(node.op_type) if node.domain == ML_DOMAIN else None
    return None if kind is None else kind(node, model, constants)


def _describe(array: np.ndarray) -> str:
    return f"{array.dtype} {list(array.shape)}"


# --- onnxruntime's score transforms (ml_common.h) -----------------------------------------

def _expf(x: np.ndarray) -> np.ndarray:
    """float32 exp: the float64 result rounded once."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return np.exp(np.asarray(x, F64)).astype(F32)


def _logf(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.asarray(x, F64)).astype(F32)


def compute_logistic(x: np.ndarray) -> np.ndarray:
    """``ComputeLogistic``: ``1 / (1 + exp(-|x|))``, mirrored for x < 0, in float32."""
    x = np.asarray(x, F32)
    v = F32(1) / (F32(1) + _expf(-np.abs(x)))
    return np.where(x < 0, F32(1) - v, v)


def compute_probit(x: np.ndarray) -> np.ndarray:
    """``ComputeProbit``: ``sqrt(2) * ErfInv(2x - 1)`` by onnxruntime's approximation."""
    with np.errstate(invalid="ignore", over="ignore"):
        y = F32(2) * np.asarray(x, F32) - F32(1)
        sign = np.where(y < 0, F32(-1), F32(1))
        y = (F32(1) - y) * (F32(1) + y)
        log = _logf(y)
        v = ERFINV_C1 + F32(0.5) * log
        v3 = -v + np.sqrt(v * v - ERFINV_C2 * log)
        return SQRT2 * (sign * np.sqrt(v3))


def _row_max(x: np.ndarray) -> np.ndarray:
    """The softmaxes' max: from -FLT_MAX up, NaNs skipped (``if (v > v_max)``)."""
    return np.max(np.where(x > -FLT_MAX, x, F32(-FLT_MAX)), axis=-1, keepdims=True)


def compute_softmax(x: np.ndarray) -> np.ndarray:
    """``ComputeSoftmax`` over the last axis, in float32 (its sum sequential)."""
    x = np.asarray(x, F32)
    exps = _expf(x - _row_max(x))
    return exps / np.add.accumulate(exps, axis=-1, dtype=F32)[..., -1:]


def compute_softmax_zero(scores: np.ndarray) -> np.ndarray:
    """``ComputeSoftmaxZero`` over the last axis: scores within 1e-7 of 0 are scaled by
    exp(-max) in the scores' type (float64 for double trees) and left out of the float
    sum; the division is in the scores' type."""
    x = scores.astype(F32)
    top = _row_max(x)
    big = (x > SOFTMAX_ZERO_EPSILON) | (x < -SOFTMAX_ZERO_EPSILON)
    exps = np.where(big, _expf(x - top), F32(0))
    total = np.add.accumulate(exps, axis=-1, dtype=F32)[..., -1:]
    with np.errstate(invalid="ignore", over="ignore"):
        small = scores * _expf(-top).astype(scores.dtype)
        values = np.where(big, exps.astype(scores.dtype), small)
        return values / total.astype(scores.dtype)


def _mlas_softmax(x: np.ndarray) -> np.ndarray:
    """MLAS's softmax (its exp polynomial and a reciprocal), within a few ulps."""
    x = np.asarray(x, F32)
    exps = _expf(x - _row_max(x))
    return exps * (F32(1) / np.add.accumulate(exps, axis=-1, dtype=F32)[..., -1:])


def write_scores(scores: np.ndarray, transform: str) -> np.ndarray:
    """``write_scores`` for two scores or more a row: the transform of ``scores`` (the
    threshold type); NONE keeps the type, the others give float32."""
    if transform == "NONE":
        return scores
    if transform == "SOFTMAX_ZERO":
        return compute_softmax_zero(scores)
    return {"LOGISTIC": compute_logistic, "SOFTMAX": compute_softmax,
            "PROBIT": compute_probit}[transform](scores.astype(F32))


# --- attributes ---------------------------------------------------------------------------

class _Attributes:
    """A node's attributes, read once, with typed getters that fail with
    ACL_ERROR_PARSE_MODEL naming the node and the attribute."""

    def __init__(self, owner: _HostNode, allowed: frozenset[str]) -> None:
        self.owner = owner
        self.protos = {}
        for attribute in owner.node.attribute:
            if attribute.name not in allowed:
                raise owner.fail(ACL_ERROR_PARSE_MODEL,
                                 f"has an unknown attribute {attribute.name!r} (it takes "
                                 f"{sorted(allowed)})")
            self.protos[attribute.name] = attribute

    def has(self, name: str) -> bool:
        return name in self.protos

    def _get(self, name: str, kind: str) -> Any:
        from onnx import AttributeProto, helper

        attribute = self.protos[name]
        if attribute.type != getattr(AttributeProto, kind):
            raise self.owner.fail(ACL_ERROR_PARSE_MODEL,
                                  f"attribute {name!r} is a "
                                  f"{AttributeProto.AttributeType.Name(attribute.type)}; it "
                                  f"must be {kind}")
        return helper.get_attribute_value(attribute)

    def ints(self, name: str) -> np.ndarray:
        return np.array(self._get(name, "INTS") if name in self.protos else [], np.int64)

    def floats(self, name: str) -> np.ndarray:
        return np.array(self._get(name, "FLOATS") if name in self.protos else [], F32)

    def strings(self, name: str) -> list[str]:
        values = self._get(name, "STRINGS") if name in self.protos else []
        return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]

    def int(self, name: str, default: int) -> int:
        return int(self._get(name, "INT")) if name in self.protos else default

    def float(self, name: str, default: float) -> float:
        return float(self._get(name, "FLOAT")) if name in self.protos else default

    def string(self, name: str, default: str) -> str:
        if name not in self.protos:
            return default
        value = self._get(name, "STRING")
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    def tensor(self, name: str, dtypes: tuple[type, ...] = (F32, F64)) -> np.ndarray | None:
        """A 1-d tensor attribute (``*_as_tensor``, opset 5's arrays), or None."""
        if name not in self.protos:
            return None
        from onnx import numpy_helper

        array = numpy_helper.to_array(self._get(name, "TENSOR"))
        if array.ndim != 1 or array.size == 0 or array.dtype not in [np.dtype(d)
                                                                      for d in dtypes]:
            raise self.owner.fail(ACL_ERROR_PARSE_MODEL,
                                  f"attribute {name!r} is a {_describe(array)} tensor; it "
                                  f"must be a non-empty vector of "
                                  f"{' or '.join(np.dtype(d).name for d in dtypes)}")
        return array

    def transform(self, name: str = "post_transform") -> str:
        value = self.string(name, "NONE")
        if value not in TRANSFORMS:
            raise self.owner.fail(ACL_ERROR_PARSE_MODEL,
                                  f"{name} {value!r} is not one of {list(TRANSFORMS)}")
        return value

    def same_length(self, names: list[str], arrays: list[Any]) -> int:
        lengths = {name: len(array) for name, array in zip(names, arrays, strict=True)}
        if len(set(lengths.values())) > 1:
            raise self.owner.fail(ACL_ERROR_PARSE_MODEL,
                                  f"attributes {names} must have one length; they have "
                                  f"{lengths}")
        return next(iter(lengths.values()), 0)


# --- trees: onnxruntime's opset-3 form ----------------------------------------------------

class _Table:
    """Trees as onnxruntime's TreeEnsembleCommon holds them, by node position: per node
    the mode (LEQ..NEQ, LEAF), feature, threshold (float32 or float64, as given), whether a
    missing value goes to the true child, and the two children (positions; -1 for a leaf);
    the roots, one per tree; the leaves' weights in onnxruntime's order."""

    def __init__(self, mode: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
                 track: np.ndarray, true_child: np.ndarray, false_child: np.ndarray,
                 roots: np.ndarray, weight_node: np.ndarray, weight_target: np.ndarray,
                 weight_value: np.ndarray, targets: int) -> None:
        self.mode = mode.astype(np.int8)
        self.feature = feature
        self.threshold = threshold
        self.track = track
        self.true_child = true_child
        self.false_child = false_child
        self.roots = roots
        self.weight_node = weight_node
        self.weight_target = weight_target
        self.weight_value = weight_value
        self.targets = targets
        branch = self._reached() & (self.mode != LEAF)
        self.features = int(feature[branch].max()) + 1 if branch.any() else 0  # columns read

    def _reached(self) -> np.ndarray:
        """The nodes a walk from the roots reaches (onnxruntime lays out those only)."""
        reached = np.zeros(len(self.mode), bool)
        level = np.unique(self.roots)
        while level.size:
            level = level[~reached[level]]
            reached[level] = True
            level = level[self.mode[level] != LEAF]
            level = np.unique(np.concatenate([self.true_child[level], self.false_child[level]]))
        return reached


def _tracks(attrs: _Attributes, count: int) -> np.ndarray:
    """nodes_missing_value_tracks_true: a node beyond the list tracks false; only 1 is
    true (onnxruntime's ``== 1``)."""
    values = attrs.ints("nodes_missing_value_tracks_true")[:count]
    track = np.zeros(count, bool)
    track[:len(values)] = values == 1
    return track


def _v3_table(owner: _HostNode, attrs: _Attributes, prefix: str, targets: int) -> _Table:
    """The table of a TreeEnsembleRegressor/Classifier (``prefix``: 'target_'/'class_'),
    with onnxruntime's checks (``tree_ensemble_attribute.h``, ``tree_ensemble_common.h``)."""
    fail = owner.fail
    tree_ids, node_ids = attrs.ints("nodes_treeids"), attrs.ints("nodes_nodeids")
    features = attrs.ints("nodes_featureids")
    true_ids, false_ids = attrs.ints("nodes_truenodeids"), attrs.ints("nodes_falsenodeids")
    mode_names = attrs.strings("nodes_modes")
    values = _one_of(owner, attrs, "nodes_values")
    for name in ("nodes_hitrates", "base_values", f"{prefix}weights"):
        _one_of(owner, attrs, name)  # only one of the two spellings
    count = attrs.same_length(
        ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
         "nodes_truenodeids", "nodes_falsenodeids", "nodes_values(_as_tensor)"],
        [tree_ids, node_ids, features, mode_names, true_ids, false_ids, values])
    modes = np.empty(count, np.int8)
    for index, name in enumerate(mode_names):
        if name not in MODE_NAMES:
            raise fail(ACL_ERROR_PARSE_MODEL,
                       f"nodes_modes[{index}] is {name!r}; it must be one of "
                       f"{sorted(MODE_NAMES)}")
        modes[index] = MODE_NAMES[name]
    internal = modes != LEAF
    bad = np.flatnonzero(internal & (features < 0))
    if bad.size:
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"nodes_featureids[{bad[0]}] is {features[bad[0]]}; it must be >= 0")
    position = {}
    for index, key in enumerate(zip(tree_ids.tolist(), node_ids.tolist(), strict=True)):
        if position.setdefault(key, index) != index:
            raise fail(ACL_ERROR_PARSE_MODEL,
                       f"node {key[1]} of tree {key[0]} is listed twice (positions "
                       f"{position[key]} and {index})")
    children = []
    for ids, side in ((true_ids, "true"), (false_ids, "false")):
        child = np.full(count, -1, np.int64)
        for index in np.flatnonzero(internal).tolist():
            target = int(ids[index])
            if not 0 <= target < count:  # onnxruntime: 0 <= id < the number of nodes
                raise fail(ACL_ERROR_PARSE_MODEL,
                           f"nodes_{side}nodeids[{index}] is {target}; it must be in "
                           f"[0, {count})")
            found = position.get((int(tree_ids[index]), target))
            if found is None:
                raise fail(ACL_ERROR_PARSE_MODEL,
                           f"nodes_{side}nodeids[{index}]: node {target} of tree "
                           f"{tree_ids[index]} does not exist")
            if found == index:
                raise fail(ACL_ERROR_PARSE_MODEL,
                           f"node {node_ids[index]} of tree {tree_ids[index]} is its own "
                           f"{side} child")
            child[index] = found
        children.append(child)
    starts = np.flatnonzero(np.r_[True, tree_ids[1:] != tree_ids[:-1]]) if count else \
        np.zeros(0, np.int64)
    weight_ids = attrs.ints(f"{prefix}ids")
    weight_tree_ids, weight_node_ids = attrs.ints(f"{prefix}treeids"), \
        attrs.ints(f"{prefix}nodeids")
    weights = _one_of(owner, attrs, f"{prefix}weights")
    attrs.same_length([f"{prefix}ids", f"{prefix}treeids", f"{prefix}nodeids",
                       f"{prefix}weights(_as_tensor)"],
                      [weight_ids, weight_tree_ids, weight_node_ids, weights])
    if weight_ids.size and (weight_ids.min() < 0 or weight_ids.max() >= targets):
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"{prefix}ids holds {int(weight_ids.min())}..{int(weight_ids.max())}; "
                   f"each must be in [0, {targets})")
    nodes = np.empty(weight_ids.size, np.int64)
    for index, key in enumerate(zip(weight_tree_ids.tolist(), weight_node_ids.tolist(),
                                          strict=True)):
        found = position.get(key)
        if found is None:
            raise fail(ACL_ERROR_PARSE_MODEL,
                       f"{prefix}nodeids[{index}]: node {key[1]} of tree {key[0]} does not "
                       f"exist")
        nodes[index] = found
    order = np.lexsort((weight_node_ids, weight_tree_ids))  # stable: (tree, node), position
    order = order[~internal[nodes[order]]]  # weights of a branch node are ignored
    table = _Table(modes, features, values if values.size else np.zeros(0, F32),
                   _tracks(attrs, count), children[0], children[1], starts, nodes[order],
                   weight_ids[order], weights[order], targets)
    _check_walk(owner, table)
    return table


def _one_of(owner: _HostNode, attrs: _Attributes, name: str) -> np.ndarray:
    """``name`` (floats) or ``name_as_tensor`` (float32/float64), not both; empty if none."""
    tensor = attrs.tensor(f"{name}_as_tensor")
    if tensor is not None and attrs.has(name):
        raise owner.fail(ACL_ERROR_PARSE_MODEL,
                         f"has both {name!r} and {name + '_as_tensor'!r}; only one may be set")
    return tensor if tensor is not None else attrs.floats(name)


def _check_walk(owner: _HostNode, table: _Table) -> None:
    """onnxruntime lays each tree out from its root, false child first, and refuses a false
    child reached before (``False node must always be the next node``); a true child may be
    shared. A cycle (which onnxruntime would walk forever) is refused too. A plain forest
    (no node with two parents) needs no walk."""
    internal = table.mode != LEAF
    references = np.concatenate([table.roots, table.true_child[internal],
                                 table.false_child[internal]])
    if not references.size or np.bincount(references).max() <= 1:
        return
    visited = np.zeros(len(table.mode), bool)
    on_path = np.zeros(len(table.mode), bool)
    for root in table.roots.tolist():
        if visited[root]:
            continue
        stack = [(root, 0)]
        visited[root] = on_path[root] = True
        while stack:
            node, state = stack.pop()
            if not internal[node] or state == 2:
                on_path[node] = False
                continue
            stack.append((node, state + 1))
            child = int(table.false_child[node] if state == 0 else table.true_child[node])
            if on_path[child]:
                raise owner.fail(ACL_ERROR_PARSE_MODEL,
                                 f"the trees have a cycle through node position {child}")
            if visited[child]:
                if state == 0:
                    raise owner.fail(ACL_ERROR_PARSE_MODEL,
                                     f"node position {child} is the false child of node "
                                     f"position {node} and is reached before (onnxruntime "
                                     f"refuses a shared false child)")
                continue
            visited[child] = on_path[child] = True
            stack.append((child, 0))


def _v5_table(owner: _HostNode, attrs: _Attributes) -> tuple[_Table, np.dtype]:
    """The table of an opset-5 TreeEnsemble as onnxruntime converts it to its opset-3 form
    (``TreeEnsembleAttributesV5::convert_to_v3``): leaves after the branch nodes, each
    BRANCH_MEMBER a chain of BRANCH_EQ nodes sharing the true child; and the threshold
    type (the type of ``nodes_splits``)."""
    fail = owner.fail
    splits = attrs.tensor("nodes_splits")
    weights = attrs.tensor("leaf_weights")
    if splits is None or weights is None:
        raise fail(ACL_ERROR_PARSE_MODEL, "needs the attributes 'nodes_splits' and "
                                          "'leaf_weights'")
    dtype = splits.dtype
    if weights.dtype != dtype:
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"leaf_weights is {weights.dtype} and nodes_splits {dtype}; they must be "
                   f"one type")
    modes = attrs.tensor("nodes_modes", (np.uint8,))
    features = attrs.ints("nodes_featureids")
    true_ids, false_ids = attrs.ints("nodes_truenodeids"), attrs.ints("nodes_falsenodeids")
    true_leaf, false_leaf = attrs.ints("nodes_trueleafs"), attrs.ints("nodes_falseleafs")
    count = attrs.same_length(
        ["nodes_featureids", "nodes_splits", "nodes_modes", "nodes_truenodeids",
         "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs"],
        [features, splits, modes, true_ids, false_ids, true_leaf, false_leaf])
    tracks = attrs.ints("nodes_missing_value_tracks_true")
    if tracks.size not in (0, count):
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"nodes_missing_value_tracks_true has {tracks.size} values; it must have "
                   f"0 or {count} (one per node)")
    leaf_targets = attrs.ints("leaf_targetids")
    leaves = attrs.same_length(["leaf_targetids", "leaf_weights"], [leaf_targets, weights])
    targets = attrs.int("n_targets", 0)
    if targets <= 0:
        raise fail(ACL_ERROR_PARSE_MODEL, f"n_targets is {targets}; it must be > 0")
    if leaves and (leaf_targets.min() < 0 or leaf_targets.max() >= targets):
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"leaf_targetids holds {int(leaf_targets.min())}.."
                   f"{int(leaf_targets.max())}; each must be in [0, {targets})")
    bad = np.flatnonzero(modes > MEMBER)
    if bad.size:
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"nodes_modes[{bad[0]}] is {modes[bad[0]]}; it must be 0..6 (BRANCH_LEQ, "
                   f"LT, GTE, GT, EQ, NEQ, MEMBER)")
    bad = np.flatnonzero(features < 0)
    if bad.size:
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"nodes_featureids[{bad[0]}] is {features[bad[0]]}; it must be >= 0")
    children = []
    for ids, is_leaf, side in ((true_ids, true_leaf, "true"), (false_ids, false_leaf, "false")):
        is_leaf = is_leaf != 0
        limit = np.where(is_leaf, leaves, count)
        bad = np.flatnonzero((ids < 0) | (ids >= limit))
        if bad.size:
            kind = "leaf" if is_leaf[bad[0]] else "node"
            raise fail(ACL_ERROR_PARSE_MODEL,
                       f"nodes_{side}nodeids[{bad[0]}] is {ids[bad[0]]}, a {kind} index out "
                       f"of [0, {limit[bad[0]]})")
        children.append(np.where(is_leaf, count + ids, ids))
    roots = attrs.ints("tree_roots")
    bad = np.flatnonzero((roots < 0) | (roots >= count))
    if bad.size:
        raise fail(ACL_ERROR_PARSE_MODEL,
                   f"tree_roots[{bad[0]}] is {roots[bad[0]]}; it must be in [0, {count})")
    _check_v5_walk(owner, roots, children[0], children[1], count)
    mode = np.concatenate([modes.astype(np.int8), np.full(leaves, LEAF, np.int8)])
    threshold = np.concatenate([splits, np.zeros(leaves, dtype)])
    feature = np.concatenate([features, np.zeros(leaves, np.int64)])
    track = np.concatenate([tracks == 1 if tracks.size else np.zeros(count, bool),
                            np.zeros(leaves, bool)])
    true_child = np.concatenate([children[0], np.full(leaves, -1, np.int64)])
    false_child = np.concatenate([children[1], np.full(leaves, -1, np.int64)])
    members = np.flatnonzero(modes == MEMBER)
    if members.size:
        mode, feature, threshold, track, true_child, false_child = _member_chains(
            owner, attrs, members, dtype, mode, feature, threshold, track, true_child,
            false_child)
    table = _Table(mode, feature, threshold, track, true_child, false_child, roots,
                   count + np.arange(leaves), leaf_targets, weights, targets)
    return table, dtype


def _check_v5_walk(owner: _HostNode, roots: np.ndarray, true_child: np.ndarray,
                   false_child: np.ndarray, count: int) -> None:
    """onnxruntime walks every tree from its root and refuses a branch node reached twice
    (from two parents, two trees, or a cycle); leaves may be shared."""
    seen = np.zeros(count, bool)
    level = roots
    while level.size:
        unique, counts = np.unique(level, return_counts=True)
        again = unique[(counts > 1) | seen[unique]]
        if again.size:
            raise owner.fail(ACL_ERROR_PARSE_MODEL,
                             f"branch node {again[0]} is reached twice (a cycle or a shared "
                             f"node, which onnxruntime refuses)")
        seen[level] = True
        level = np.concatenate([true_child[level], false_child[level]])
        level = level[level < count]


def _member_chains(owner: _HostNode, attrs: _Attributes, members: np.ndarray, dtype: Any,
                   *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """BRANCH_MEMBER nodes as chains: membership_values, sets separated by NaN in node
    order, each node an equality on its first value whose false child is one on the next
    (same feature and missing-value rule), the last one's false child the node's.
    onnxruntime 1.32 compares x with a set of values within [0, 30] exactly, with any
    other set of int32 values as ``int32(x)`` (truncated; NaN, inf and values out
    of int32 give INT32_MIN, as x86's conversion does): TRUNC_EQ. A set with a non-integer
    outside [0, 30], which it refuses, is compared exactly, as ONNX says."""
    values = attrs.tensor("membership_values")
    if values is None:
        raise owner.fail(ACL_ERROR_PARSE_MODEL,
                         "has BRANCH_MEMBER nodes but no 'membership_values'")
    if values.dtype != dtype:
        raise owner.fail(ACL_ERROR_PARSE_MODEL,
                         f"membership_values is {values.dtype}; it must be {dtype} like "
                         f"nodes_splits")
    mode, feature, threshold, track, true_child, false_child = (list(c) for c in columns)
    sets, current = [], []
    for value in values.tolist():
        if math.isnan(value):
            sets.append(current)
            current = []
        else:
            current.append(value)
    sets.append(current)
    for index, node in enumerate(members.tolist()):
        chosen = sets[index] if index < len(sets) else []
        if not chosen:
            raise owner.fail(ACL_ERROR_PARSE_MODEL,
                             f"BRANCH_MEMBER node {node} has no membership value")
        integers = all(v == int(v) and INT32_MIN <= v < INT32_LIMIT for v in chosen)
        exact = not integers or all(MEMBER_EXACT[0] <= v <= MEMBER_EXACT[1] for v in chosen)
        kind = EQ if exact else TRUNC_EQ
        links = [node, *range(len(mode), len(mode) + len(chosen) - 1)]
        last_false = false_child[node]
        for position, (link, member) in enumerate(zip(links, chosen, strict=True)):
            following = links[position + 1] if position + 1 < len(links) else last_false
            if link == node:
                mode[node], threshold[node], false_child[node] = kind, member, following
            else:
                mode.append(kind)
                threshold.append(member)
                false_child.append(following)
                feature.append(feature[node])
                track.append(track[node])
                true_child.append(true_child[node])
    return (np.array(mode, np.int8), np.array(feature, np.int64), np.array(threshold, dtype),
            np.array(track, bool), np.array(true_child, np.int64),
            np.array(false_child, np.int64))


# --- trees: the compiled form and its walk -------------------------------------------------

class _Forest:
    """A table compiled for one threshold type (see the design note): per branch node its
    comparison as ``s * x <= t`` and its two children, per slot the arrays one lane step
    reads. Branch nodes are numbered by the column they read (the dense walk repeats each
    column over its nodes), leaves after them (a leaf's rank is its number - branches)."""

    def __init__(self, owner: _HostNode, table: _Table, dtype: np.dtype) -> None:
        self.dtype = dtype
        mode, track = table.mode, table.track
        internal = mode != LEAF
        threshold = table.threshold.astype(dtype)
        raw = internal & ((mode == EQ) | (mode == NEQ) | (mode == TRUNC_EQ) |
                          np.isnan(threshold))
        ordered = internal & ~raw
        effective = np.where(ordered & track, NEGATED[np.minimum(mode, GT)], mode)
        negative = ordered & ((effective == GTE) | (effective == GT))
        bound = np.where(negative, -threshold, threshold)
        strict = ordered & ((effective == LT) | (effective == GT))
        below = np.nextafter(bound, np.array(-np.inf, dtype))
        below[np.isneginf(bound)] = np.nan  # nothing is below -inf
        bound = np.where(strict, below, bound).astype(dtype)
        swap = ordered & track  # the NaN side (the second child) is then the true child
        first = np.where(swap, table.false_child, table.true_child)
        second = np.where(swap, table.true_child, table.false_child)
        kind = np.select([raw & (mode == NEQ), raw & (mode == TRUNC_EQ), raw],
                         [RAW_NEQ, RAW_TRUNC, RAW_EQ], LEQ_FORM)

        self.features = table.features
        self.negated = bool(negative.any())
        self.width = 2 * self.features + 1 if self.negated else self.features + 1
        column = np.where(negative, self.features + 1 + table.feature, table.feature)
        column[table.feature >= self.features] = self.features  # unreachable: the NaN column
        branches = np.flatnonzero(internal)
        branches = branches[np.argsort(column[branches], kind="stable")]
        self.leaf_nodes = np.flatnonzero(~internal)
        self.branches = branches.size
        self.nodes = self.branches + self.leaf_nodes.size
        number = np.empty(len(mode), np.int64)
        number[branches] = np.arange(self.branches)
        number[self.leaf_nodes] = np.arange(self.branches, self.nodes)
        self.leaf_numbers = np.arange(self.branches, self.nodes, dtype=INTP)
        self.column = column[branches].astype(INTP)
        self.column_counts = np.bincount(self.column, minlength=self.width)
        self.threshold = np.ascontiguousarray(bound[branches])
        self.first = number[first[branches]].astype(INTP)
        self.second = number[second[branches]].astype(INTP)
        self.delta = self.first - self.second
        self.raw = bool(raw.any())
        self.kind = kind[branches].astype(np.int8)
        self.raw_track = (track & raw)[branches]
        self.roots = number[table.roots].astype(INTP)
        self.depth = self._depth(owner)
        self._slots()
        self._native_slots(owner)

    def _depth(self, owner: _HostNode) -> int:
        """The most branch nodes on a path from a root: the steps a walk takes."""
        level, depth = np.unique(self.roots), 0
        while True:
            level = level[level < self.branches]
            if not level.size:
                return depth
            depth += 1
            if depth > self.branches:
                raise owner.fail(ACL_ERROR_PARSE_MODEL, "the trees have a cycle")
            level = np.unique(np.concatenate([self.first[level], self.second[level]]))

    def _pair_order(self) -> np.ndarray:
        """The branch nodes in the order their child pairs are laid out: level by level
        from the roots, each level in tree order, so that the lanes of one tree (walked
        side by side) read nearby slots; unreachable nodes last."""
        order, seen, level = [], np.zeros(self.branches, bool), self.roots
        while level.size:
            level = level[level < self.branches]
            level = level[np.sort(np.unique(level, return_index=True)[1])]
            level = level[~seen[level]]
            seen[level] = True
            order.append(level)
            level = np.stack([self.second[level], self.first[level]], 1).ravel()
        return np.concatenate([*order, np.flatnonzero(~seen)]).astype(INTP)

    def _slots(self) -> None:
        """One slot per root, then a (second, first) pair per branch node (its children):
        per slot the column and bound its node compares, the pair its node leads to (a
        leaf: the slot itself), the leaf rank (-1: a branch node), the RAW kinds."""
        trees = self.roots.size
        order = self._pair_order()
        pair = np.empty(self.branches, INTP)
        pair[order] = np.arange(self.branches)
        node = np.concatenate([self.roots,
                               np.stack([self.second[order], self.first[order]], 1).ravel()])
        branch = node < self.branches
        at = np.where(branch, node, 0)

        def pick(values: np.ndarray, leaf: Any) -> np.ndarray:
            return np.where(branch, values[at], leaf) if self.branches else \
                np.full(node.size, leaf)

        self.slot_column = pick(self.column, self.features).astype(INTP)  # leaf: NaN column
        self.slot_bound = pick(self.threshold, 0).astype(self.dtype)
        self.slot_base = np.where(branch, trees + 2 * pick(pair, 0),
                                  np.arange(node.size)).astype(INTP)
        self.slot_leaf = np.where(branch, -1, node - self.branches).astype(INTP)
        self.slot_kind = pick(self.kind, LEQ_FORM).astype(np.int8)
        self.slot_track = pick(self.raw_track, False).astype(bool)

    def _native_slots(self, owner: _HostNode) -> None:
        """The slots as the C walk reads them (``_native.tree_leaves``): one record per slot
        (bound, column, next: ``slot_base``), the leaf ranks, the kinds (None: every slot
        compares ``x <= bound``); ``native_records`` None where its int32 indices cannot
        hold the forest. Every index is checked here, once, as the walk relies on it: a
        branch slot's pair and a leaf's self-pointer inside the slots, every column inside
        the row, every leaf rank a leaf."""
        self.native_records = self.native_leaves = self.native_kinds = None
        slots, trees = self.slot_base.size, self.roots.size
        if slots > SLOT_INDEX_LIMIT or self.width > SLOT_INDEX_LIMIT:
            return
        index = np.arange(slots)
        branch = self.slot_leaf < 0
        bad = np.flatnonzero(
            (self.slot_column < 0) | (self.slot_column >= self.width) |
            np.where(branch, (self.slot_base < trees) | (self.slot_base + 1 >= slots),
                     (self.slot_base != index) | (self.slot_leaf >= self.leaf_nodes.size)))
        if bad.size or trees > slots:
            at = int(bad[0]) if bad.size else 0
            raise owner.fail(ACL_ERROR_INTERNAL_ERROR,
                             f"the compiled trees are inconsistent: slot {at} of {slots} "
                             f"(column {self.slot_column[at]} of {self.width}, next "
                             f"{self.slot_base[at]}, leaf {self.slot_leaf[at]}; {trees} "
                             f"roots)")
        records = np.empty(slots, SLOT_RECORDS[self.dtype])
        records["bound"] = self.slot_bound
        records["column"] = self.slot_column
        records["next"] = self.slot_base
        self.native_records = records.view(np.int32)
        self.native_leaves = self.slot_leaf.astype(np.int32)
        if self.raw:
            self.native_kinds = (self.slot_kind | np.where(self.slot_track, RAW_TRACK, 0)
                                 ).astype(np.int8)

    def rows(self, x: np.ndarray) -> np.ndarray:
        """The rows the walk reads: the features (as the threshold type), a NaN column,
        and the negated features when a comparison uses them."""
        features = self.features
        rows = np.empty((x.shape[0], self.width), self.dtype)
        rows[:, :features] = x[:, :features]
        rows[:, features] = np.nan
        if self.negated:
            np.negative(rows[:, :features], out=rows[:, features + 1:])
        return rows

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf rank each tree reaches for each row of ``x`` (rows, features): (rows,
        trees) intp; by the C walk where it is there, else by numpy's."""
        count, trees = x.shape[0], self.roots.size
        if not count or not trees:
            return np.zeros((count, trees), INTP)
        rows = self.rows(x)
        lib = native.kernels()
        walk = getattr(lib, "tree_leaves", None) if self.native_records is not None else None
        if walk is not None:
            leaf = np.empty((count, trees), INTP)
            walk(rows, self.native_records, self.native_leaves, self.native_kinds, leaf,
                 (count, self.width, trees, self.depth))
            return leaf
        if count <= DENSE_MAX_ROWS:
            return self._dense(rows)
        return self._lanes(rows)

    @staticmethod
    def _compare(value: np.ndarray, bound: np.ndarray, kind: np.ndarray | None = None,
                 track: np.ndarray | None = None) -> np.ndarray:
        """``value <= bound``, or the RAW kinds' comparisons where ``kind`` says so."""
        result = value <= bound
        if kind is not None:
            with np.errstate(invalid="ignore"):
                inside = (value > -INT32_LIMIT - 1) & (value < INT32_LIMIT)
                truncated = np.where(inside, np.trunc(value), INT32_MIN)
            result = np.select([kind == RAW_EQ, kind == RAW_NEQ, kind == RAW_TRUNC],
                               [value == bound, value != bound, truncated == bound], result)
            result |= track & np.isnan(value)
        return result

    def _dense(self, rows: np.ndarray) -> np.ndarray:
        """Every branch node compared at once (each column repeated over its nodes), then
        one pointer step per level."""
        count, branches, trees = rows.shape[0], self.branches, self.roots.size
        following = np.empty((count, self.nodes), INTP)
        following[:, branches:] = self.leaf_numbers  # a leaf stays
        if branches:
            value = np.repeat(rows[0], self.column_counts) if count == 1 else \
                np.repeat(rows, self.column_counts, axis=1)
            go = self._compare(value, self.threshold, *((self.kind, self.raw_track)
                                                       if self.raw else ()))
            np.multiply(go, self.delta, out=following[:, :branches])
            following[:, :branches] += self.second
        if count == 1:
            state, table = self.roots, following[0]
            for _ in range(self.depth):
                state = table.take(state)
        else:
            offset = np.repeat(np.arange(count, dtype=INTP) * self.nodes, trees)
            state, table = np.tile(self.roots, count), following.ravel()
            for _ in range(self.depth):
                state = table.take(state + offset)
        return (state - branches).reshape(count, trees)

    def _lanes(self, rows: np.ndarray) -> np.ndarray:
        """Every (row, tree) a lane, one step per level; lanes that stopped moving (at
        their leaf) are dropped once enough have, and the walk ends when all have."""
        count, trees = rows.shape[0], self.roots.size
        flat = rows.ravel()
        slot = np.repeat(np.arange(trees, dtype=INTP), count)  # lane (tree, row): the roots
        base = np.tile(np.arange(count, dtype=INTP) * self.width, trees)
        final = np.empty(count * trees, INTP)
        lanes = None  # the lanes still walking, once some were dropped
        for step in range(self.depth):
            column = self.slot_column.take(slot)
            column += base
            value = flat.take(column)
            bound = self.slot_bound.take(slot)
            go = self._compare(value, bound, self.slot_kind.take(slot),
                               self.slot_track.take(slot)) if self.raw else value <= bound
            after = self.slot_base.take(slot)
            after += go
            if step >= COMPACT_FROM:
                stay = after == slot
                stayed = np.count_nonzero(stay)
                if stayed == after.size:
                    slot = after
                    break
                if stayed >= COMPACT_SHARE * after.size:
                    done, walking = np.flatnonzero(stay), np.flatnonzero(~stay)
                    ids = lanes if lanes is not None else np.arange(after.size, dtype=INTP)
                    final[ids.take(done)] = after.take(done)
                    lanes, after, base = ids.take(walking), after.take(walking), \
                        base.take(walking)
            slot = after
        if lanes is None:
            final = slot
        else:
            final[lanes] = slot
        return self.slot_leaf.take(final).reshape(trees, count).T


# --- trees: scores ------------------------------------------------------------------------

class _LeafValues:
    """The leaves' weights in one threshold type, by leaf rank. ``unique``: a leaf's first
    weight, or its ``nodes_values`` entry when it has none (the one-target score). Leaves
    of one weight at most (``single``): its ``target`` and ``value`` (0 for none) and
    whether it has one (``weighted``). Else per target each leaf's weights in order,
    zero-padded to the longest list: ``weights`` and ``present`` (targets, leaves, depth)."""

    def __init__(self, table: _Table, forest: _Forest, dtype: np.dtype) -> None:
        leaves, targets = forest.leaf_nodes.size, table.targets
        rank = np.full(len(table.mode), -1, np.int64)
        rank[forest.leaf_nodes] = np.arange(leaves)
        node_rank = rank[table.weight_node]
        value = table.weight_value.astype(dtype)
        target = table.weight_target
        self.targets = targets
        self.unique = table.threshold[forest.leaf_nodes].astype(dtype) \
            if table.threshold.size else np.zeros(leaves, dtype)
        first = np.unique(node_rank, return_index=True)
        self.unique[first[0]] = value[first[1]]
        self.nan = bool(np.isnan(value).any() or np.isnan(self.unique).any())
        counts = np.bincount(node_rank, minlength=leaves)
        self.single = counts.max(initial=0) <= 1
        if self.single:
            self.target = np.zeros(leaves, INTP)
            self.value = np.zeros(leaves, dtype)
            self.weighted = np.zeros(leaves, bool)
            self.target[node_rank], self.value[node_rank] = target, value
            self.weighted[node_rank] = True
            self.all_weighted = bool(self.weighted.all())
            return
        key = node_rank * targets + target
        order = np.argsort(key, kind="stable")
        position = np.zeros(key.size, np.int64)  # the weight's place in its (leaf, target)
        sorted_key = key[order]
        start = np.r_[0, np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1]
        position[order] = np.arange(key.size) - np.repeat(start, np.diff(np.r_[start,
                                                                               key.size]))
        self.depth = int(position.max()) + 1
        self.weights = np.zeros((targets, leaves, self.depth), dtype)
        self.weights[target, node_rank, position] = value
        self.present = np.zeros(self.weights.shape, bool)
        self.present[target, node_rank, position] = True
        self.reached = np.ascontiguousarray(self.present.any(axis=2).T)  # (leaves, targets)
        self.full = bool(self.reached.all())


def _extreme(kind: str, values: np.ndarray, present: np.ndarray, nan: bool) -> np.ndarray:
    """Min or max along axis 1 over the ``present`` entries, as onnxruntime's
    ``(!has || v < score) ? v : score`` in order: a NaN met first stays, a later one is
    skipped."""
    sentinel = np.inf if kind == "MIN" else -np.inf
    usable = present & ~np.isnan(values) if nan else present
    filled = np.where(usable, values, sentinel)
    best = filled.min(axis=1) if kind == "MIN" else filled.max(axis=1)
    if nan:
        first = np.take_along_axis(values, np.argmax(present, axis=1)[:, None], axis=1)[:, 0]
        best = np.where(np.isnan(first), first, best)
    return best.astype(values.dtype)


def _one_target(kind: str, leaf: np.ndarray, values: _LeafValues) -> np.ndarray:
    """(rows,) one-target score before the base value: each tree's leaf score (its
    ``unique`` value) summed in order, or their min/max."""
    scores = values.unique.take(leaf)
    if not scores.shape[1]:
        return np.zeros(scores.shape[0], values.unique.dtype)
    if kind in ("SUM", "AVERAGE"):
        return np.add.accumulate(scores, axis=1)[:, -1]
    return _extreme(kind, scores, np.ones(scores.shape, bool), values.nan)


def _many_targets(kind: str, leaf: np.ndarray, values: _LeafValues
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(scores, reached), each (rows, targets): the weights per target summed in order (or
    their min/max; 0 where none), and whether any leaf of the row carried one."""
    rows, trees = leaf.shape
    targets, dtype = values.targets, values.unique.dtype
    if not trees:
        return np.zeros((rows, targets), dtype), np.zeros((rows, targets), bool)
    adding = kind in ("SUM", "AVERAGE")
    if values.single:
        target, value = values.target.take(leaf), values.value.take(leaf)
        weighted = None if values.all_weighted else values.weighted.take(leaf)
        key = target + (np.arange(rows, dtype=INTP) * targets)[:, None]
        counted = key if weighted is None else key[weighted]
        reached = (np.bincount(counted.ravel(), minlength=rows * targets) > 0).reshape(
            rows, targets)
        if adding and dtype == F64:  # bincount adds in float64, in the lanes' order
            sums = np.bincount(key.ravel(), value.ravel(), rows * targets)
            return sums.reshape(rows, targets), reached
        columns = []
        for k in range(targets):
            mine = target == k if weighted is None else (target == k) & weighted
            if adding:
                columns.append(np.add.accumulate(np.where(mine, value, dtype.type(0)),
                                                 axis=1)[:, -1])
            else:
                columns.append(_extreme(kind, value, mine, values.nan))
        return np.stack(columns, 1).astype(dtype), reached
    reached = np.full((rows, targets), True) if values.full else \
        values.reached[leaf].any(axis=1)
    columns = []
    for k in range(targets):
        weights = values.weights[k][leaf].reshape(rows, trees * values.depth)
        if adding:
            columns.append(np.add.accumulate(weights, axis=1)[:, -1])
        else:
            present = values.present[k][leaf].reshape(rows, trees * values.depth)
            columns.append(_extreme(kind, weights, present, values.nan))
    return np.stack(columns, 1).astype(dtype), reached


class _TreeNode(_HostNode):
    """What the three tree ensemble ops share: the table, a forest and leaf values per
    threshold type, the input checks and the walk."""

    allowed_inputs: tuple[np.dtype, ...] = ()
    table: _Table

    def _setup(self) -> None:
        self._compiled: dict[np.dtype, tuple[_Forest, _LeafValues]] = {}
        self.tensor_dtypes = {a.name: np.dtype(F32 if a.t.data_type == 1 else F64)
                              for a in self.node.attribute if a.name.endswith("_as_tensor")}

    def _compiled_for(self, dtype: np.dtype) -> tuple[_Forest, _LeafValues]:
        compiled = self._compiled.get(dtype)
        if compiled is None:
            forest = _Forest(self, self.table, dtype)
            compiled = self._compiled[dtype] = (forest, _LeafValues(self.table, forest, dtype))
        return compiled

    def _input(self, env: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.dtype]:
        """X as (rows, columns) and the threshold type, checked as onnxruntime checks."""
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype not in self.allowed_inputs:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be one of "
                            f"{[d.name for d in self.allowed_inputs]}")
        if x.ndim not in (1, 2):
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be 1-d or 2-d")
        dtype = self.threshold_dtype(x.dtype)
        for attribute, tensor_dtype in self.tensor_dtypes.items():
            if tensor_dtype != dtype:
                raise self.fail(ACL_ERROR_INVALID_PARAM,
                                f"input X {name!r} is {x.dtype}, so the thresholds are "
                                f"{dtype}; attribute {attribute!r} is {tensor_dtype}")
        columns = x.shape[1] if x.ndim == 2 else 1  # onnxruntime: a 1-d X has 1 feature
        if self.table.features > columns:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; a tree reads feature "
                            f"{self.table.features - 1}, so it needs "
                            f"{self.table.features} columns")
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        return rows, dtype

    def threshold_dtype(self, dtype: np.dtype) -> np.dtype:
        return np.dtype(F64) if dtype == F64 else np.dtype(F32)

    def _leaves(self, env: Mapping[str, np.ndarray]) -> tuple[np.ndarray, _LeafValues]:
        x, dtype = self._input(env)
        forest, values = self._compiled_for(dtype)
        try:
            return forest.leaves(x), values
        except ValueError as error:  # the C walk refused slots _native_slots passed: a bug
            raise self.fail(ACL_ERROR_INTERNAL_ERROR, f"the tree walk failed: {error}") from error


def _regression(kind: str, transform: str, base: np.ndarray, trees: int, leaf: np.ndarray,
                values: _LeafValues, targets: int) -> np.ndarray:
    """(rows, targets) scores of TreeAggregator{Sum,Average,Min,Max}'s Finalize, in the
    threshold type, or float32 after a transform."""
    dtype = values.unique.dtype
    if targets == 1:
        origin = base[0] if base.size == 1 else dtype.type(0)
        if kind in ("SUM", "AVERAGE"):
            score = _one_target(kind, leaf, values)
            if kind == "AVERAGE":
                with np.errstate(invalid="ignore", divide="ignore"):
                    score = score / dtype.type(trees)
            score = score + origin
        else:
            score = _one_target(kind, leaf, values) + origin if trees else \
                np.full(leaf.shape[0], origin, dtype)
        score = score.astype(dtype)[:, None]
        return compute_probit(score) if transform == "PROBIT" else score
    scores, reached = _many_targets(kind, leaf, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "AVERAGE":
            scores = scores / dtype.type(trees)
        if base.size == targets:
            scores = scores + base
    return write_scores(np.where(reached, scores, 0).astype(dtype), transform)


class TreeEnsembleRegressorNode(_TreeNode):
    """ai.onnx.ml TreeEnsembleRegressor (opsets 1 and 3) as onnxruntime's CPU kernel."""

    allowed_inputs = TREE_INPUTS["TreeEnsembleRegressor"]
    ATTRIBUTES = frozenset({
        "aggregate_function", "base_values", "base_values_as_tensor", "n_targets",
        "nodes_falsenodeids", "nodes_featureids", "nodes_hitrates", "nodes_hitrates_as_tensor",
        "nodes_missing_value_tracks_true", "nodes_modes", "nodes_nodeids", "nodes_treeids",
        "nodes_truenodeids", "nodes_values", "nodes_values_as_tensor", "post_transform",
        "target_ids", "target_nodeids", "target_treeids", "target_weights",
        "target_weights_as_tensor"})

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, self.ATTRIBUTES)
        self.targets = attrs.int("n_targets", 0)
        if self.targets <= 0:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"n_targets is {self.targets}; it must be > 0")
        self.aggregate = attrs.string("aggregate_function", "SUM")
        if self.aggregate not in AGGREGATES:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"aggregate_function {self.aggregate!r} is not one of "
                            f"{list(AGGREGATES)}")
        self.transform = attrs.transform()
        self.base = _one_of(self, attrs, "base_values")
        if self.base.size not in (0, self.targets):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"base_values has {self.base.size} values; it must have 0 or "
                            f"n_targets ({self.targets})")
        self.table = _v3_table(self, attrs, "target_", self.targets)
        self._setup()

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        leaf, values = self._leaves(env)
        dtype = values.unique.dtype
        scores = _regression(self.aggregate, self.transform, self.base.astype(dtype),
                             self.table.roots.size, leaf, values, self.targets)
        return {self.node.output[0]: scores.astype(F32)}


class TreeEnsembleNode(_TreeNode):
    """ai.onnx.ml TreeEnsemble (opset 5) as onnxruntime's CPU kernel: its opset-3 form, the
    output in the threshold type (float or double, the input's)."""

    ATTRIBUTES = frozenset({
        "aggregate_function", "leaf_targetids", "leaf_weights", "membership_values",
        "n_targets", "nodes_falseleafs", "nodes_falsenodeids", "nodes_featureids",
        "nodes_hitrates", "nodes_missing_value_tracks_true", "nodes_modes", "nodes_splits",
        "nodes_trueleafs", "nodes_truenodeids", "post_transform", "tree_roots"})

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, self.ATTRIBUTES)
        aggregate, transform = attrs.int("aggregate_function", 1), attrs.int("post_transform", 0)
        if not 0 <= aggregate < len(AGGREGATES):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"aggregate_function is {aggregate}; it must be 0..3 (AVERAGE, "
                            f"SUM, MIN, MAX)")
        if not 0 <= transform < len(TRANSFORMS):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"post_transform is {transform}; it must be 0..4 (onnxruntime: "
                            f"NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT)")
        self.aggregate, self.transform = AGGREGATES[aggregate], TRANSFORMS[transform]
        if attrs.has("nodes_hitrates"):
            attrs.tensor("nodes_hitrates")
        self.table, self.dtype = _v5_table(self, attrs)
        self.targets = self.table.targets
        self.allowed_inputs = (self.dtype,)
        self._setup()
        self.tensor_dtypes = {}  # the tensors' type is the input's, checked by allowed_inputs

    def threshold_dtype(self, dtype: np.dtype) -> np.dtype:
        return self.dtype

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        leaf, values = self._leaves(env)
        scores = _regression(self.aggregate, self.transform, np.zeros(0, self.dtype),
                             self.table.roots.size, leaf, values, self.targets)
        return {self.node.output[0]: scores.astype(self.dtype)}


class TreeEnsembleClassifierNode(_TreeNode):
    """ai.onnx.ml TreeEnsembleClassifier (opsets 1 and 3) as onnxruntime's CPU kernel:
    the weights summed per class, then TreeAggregatorClassifier's labels and scores."""

    allowed_inputs = TREE_INPUTS["TreeEnsembleClassifier"]
    ATTRIBUTES = frozenset({
        "base_values", "base_values_as_tensor", "class_ids", "class_nodeids",
        "class_treeids", "class_weights", "class_weights_as_tensor", "classlabels_int64s",
        "classlabels_strings", "nodes_falsenodeids", "nodes_featureids", "nodes_hitrates",
        "nodes_hitrates_as_tensor", "nodes_missing_value_tracks_true", "nodes_modes",
        "nodes_nodeids", "nodes_treeids", "nodes_truenodeids", "nodes_values",
        "nodes_values_as_tensor", "post_transform"})

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, self.ATTRIBUTES)
        self.labels: list[Any] = attrs.strings("classlabels_strings")
        self.strings = bool(self.labels)
        if attrs.has("classlabels_strings") == attrs.has("classlabels_int64s"):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            "needs exactly one of 'classlabels_strings' and "
                            "'classlabels_int64s'")
        if not self.strings:
            self.labels = attrs.ints("classlabels_int64s").tolist()
        classes = len(self.labels)
        if not classes:
            raise self.fail(ACL_ERROR_PARSE_MODEL, "has no class labels")
        if self.strings and classes == 1:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            "has one string label; onnxruntime labels a one-class ensemble "
                            "0 or 1 and reads a second label that does not exist")
        self.transform = attrs.transform()
        self.base = _one_of(self, attrs, "base_values")
        allowed = (0, 1, 2) if classes <= 2 else (0, classes)
        if self.base.size not in allowed:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"base_values has {self.base.size} values; with {classes} "
                            f"classes it must have {' or '.join(map(str, allowed))}")
        self.table = _v3_table(self, attrs, "class_", classes)
        weights = attrs.floats("class_weights")
        if not weights.size:
            weights = attrs.tensor("class_weights_as_tensor")
        ids = attrs.ints("class_ids")
        self.all_positive = weights is None or not bool(np.any(weights < 0))
        self.binary = classes == 2 and np.unique(ids).size == 1
        self._setup()

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, Any]:
        leaf, values = self._leaves(env)
        dtype = values.unique.dtype
        classes = len(self.labels)
        base = self.base.astype(dtype)
        if classes == 1:
            label, scores = self._one_class(leaf, values, base)
        elif classes == 2:
            label, scores = self._binary_classes(leaf, values, base)
        else:
            label, scores = self._classes(leaf, values, base)
        outputs = list(self.node.output)
        result: dict[str, Any] = {}
        if outputs and outputs[0]:
            result[outputs[0]] = label
        if len(outputs) > 1 and outputs[1]:
            result[outputs[1]] = scores.astype(F32)
        return result

    def _labels(self, index: np.ndarray) -> np.ndarray:
        """Labels by class index (strings: an object array of str, as onnxruntime's)."""
        if self.strings:
            names = np.array(self.labels, object)
            return names[index] if index.size else np.zeros(0, object)
        return np.array(self.labels, np.int64)[index]

    def _one_class(self, leaf: np.ndarray, values: _LeafValues, base: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """One class (FinalizeScores1): label 1 or 0 as the score's sign; the score, or
        with two base values the first of (-score, score) transformed."""
        score = _one_target("SUM", leaf, values)
        if base.size == 2:
            score = score + base[1]
            pair = write_scores(np.stack([-score, score], 1), self.transform)
            return (score > 0).astype(np.int64), pair[:, :1]
        if base.size == 1:
            score = score + base[0]
        out = compute_probit(score) if self.transform == "PROBIT" else score
        return (score > 0).astype(np.int64), out[:, None]

    def _binary_classes(self, leaf: np.ndarray, values: _LeafValues, base: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Two classes: TreeAggregatorClassifier::FinalizeScores's binary case, its
        ``_set_score_binary`` and ``write_scores``'s one-score rules."""
        sums, reached = _many_targets("SUM", leaf, values)
        dtype = sums.dtype
        p0, p1 = sums[:, 0], sums[:, 1]
        h0, h1 = reached[:, 0], reached[:, 1]
        rows = p0.shape[0]
        second = np.full(rows, -1, np.int8)  # write_additional_scores
        if base.size == 2:
            shared = base[1] + p0
            p0, p1 = np.where(h1, -shared, p0 + base[0]), np.where(h1, shared, p1 + base[1])
            two = np.ones(rows, bool)
        else:
            if base.size == 1:
                p0 = p0 + base[0]
            else:
                second[:] = 3
            two = h1
        v0 = np.where(h0, p0, 0).astype(dtype)  # a ScoreValue without score reads 0
        v1 = np.where(h1, p1, 0).astype(dtype)
        positive = np.where(two & h1, p1, v0)
        if self.binary:
            cut = 0.5 if self.all_positive else 0.0
            winner = positive > cut
            label = self._labels(winner.astype(np.int64))
            second = np.where(winner, 0, 1) if self.all_positive else np.where(winner, 2, 3)
        else:  # onnxruntime's positive_label_/negative_label_: 1 and 0, not the labels
            index = (positive > 0).astype(np.int64)
            label = self._labels(index) if self.strings else index
        pair = write_scores(np.stack([v0, v1], 1), self.transform).astype(F32)
        single = np.zeros((rows, 2), F32)
        s = v0
        if self.transform == "PROBIT":
            single[:, 0] = compute_probit(s)
        else:
            logistic = self.transform == "LOGISTIC"
            doubled = np.isin(second, (0, 1))
            signed = np.isin(second, (2, 3))
            if logistic:
                one = np.stack([compute_logistic(-s.astype(F32)), compute_logistic(s)], 1)
                single = np.where((doubled | signed)[:, None], one, single)
            else:
                complement = np.stack([(dtype.type(1) - s), s], 1).astype(F32)
                negated = np.stack([-s, s], 1).astype(F32)
                single = np.where(doubled[:, None], complement, single)
                single = np.where(signed[:, None], negated, single)
            single[second == -1, 0] = s[second == -1].astype(F32)
        return label, np.where(two[:, None], pair, single)

    def _classes(self, leaf: np.ndarray, values: _LeafValues, base: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Three classes or more: base values added (a class without score takes its
        base), the first highest scored class, every score transformed."""
        sums, reached = _many_targets("SUM", leaf, values)
        if base.size:
            sums = np.where(reached, sums + base, base)
            reached = np.ones_like(reached)
        best = np.full(sums.shape[0], -1, np.int64)
        top = np.zeros(sums.shape[0], sums.dtype)
        for k in range(sums.shape[1]):  # get_max_weight: first strict maximum, in order
            take = reached[:, k] & ((best == -1) | (sums[:, k] > top))
            best = np.where(take, k, best)
            top = np.where(take, sums[:, k], top)
        missing = np.flatnonzero(best < 0)
        if missing.size:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {self.node.input[0]!r}: row {missing[0]} reaches no "
                            f"leaf with a class weight and there are no base values "
                            f"(onnxruntime fails there too)")
        scores = write_scores(np.where(reached, sums, 0).astype(sums.dtype), self.transform)
        return self._labels(best), scores


# --- ZipMap, linear models, Normalizer, Scaler, Binarizer, ArrayFeatureExtractor -----------

class ZipMapNode(_HostNode):
    """ai.onnx.ml ZipMap: a list with one dict per row, {label: float}, keys in sorted
    order (onnxruntime's std::map; a repeated label keeps its last score), as
    onnxruntime's Python API returns it."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, frozenset({"classlabels_int64s", "classlabels_strings"}))
        if attrs.has("classlabels_strings") == attrs.has("classlabels_int64s"):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            "needs exactly one of 'classlabels_strings' and "
                            "'classlabels_int64s'")
        self.labels: list[Any] = attrs.strings("classlabels_strings") or \
            attrs.ints("classlabels_int64s").tolist()
        keys = sorted(set(self.labels))
        last = {label: index for index, label in enumerate(self.labels)}
        self.keys, self.columns = keys, [last[key] for key in keys]

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, Any]:
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype != F32 or x.ndim not in (1, 2) or x.shape[-1] != len(self.labels):
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be float32 "
                            f"[N, {len(self.labels)}] or [{len(self.labels)}]")
        rows = x.reshape(-1, len(self.labels))[:, self.columns].tolist()
        keys = self.keys
        return {self.node.output[0]: [dict(zip(keys, row, strict=True)) for row in rows]}


def _matrix(owner: _HostNode, x: np.ndarray, name: str) -> np.ndarray:
    """A linear model's X as (rows, features): a 1-d X is one row."""
    if x.ndim not in (1, 2):
        raise owner.fail(ACL_ERROR_INVALID_PARAM,
                         f"input X {name!r} is {_describe(x)}; it must be 1-d or 2-d")
    return x.reshape(1, -1) if x.ndim == 1 else x


def _gemm(owner: _HostNode, x: np.ndarray, coefficients: np.ndarray, outputs: int,
          intercepts: np.ndarray | None, name: str) -> np.ndarray:
    """MLAS's float32 ``X @ W.T (+ b)`` (W: the first outputs x features coefficients, as
    onnxruntime reads them). Of two rows or more, as its SGEMM kernel sums: one fused
    multiply-add per feature in order (float64 then rounded once: the product is exact),
    then the intercept added; of one row (MLAS's single-row kernel sums in lanes) or of
    very many features, in float64 rounded once, within the last bit."""
    rows, features = x.shape
    if coefficients.size < outputs * features:
        raise owner.fail(ACL_ERROR_INVALID_PARAM,
                         f"input X {name!r} is {_describe(x)}: {features} features need "
                         f"{outputs * features} coefficients; the model has "
                         f"{coefficients.size}")
    weights = coefficients[:outputs * features].reshape(outputs, features).astype(F64)
    values = x.astype(F32).astype(F64)
    if rows < 2 or features > GEMM_SEQUENTIAL_MAX_FEATURES:
        product = values @ weights.T
        if intercepts is not None:
            product += intercepts.astype(F64)
        return product.astype(F32)
    total = np.zeros((rows, outputs), F32)
    for feature in range(features):
        total = (total + values[:, feature:feature + 1] * weights[:, feature]).astype(F32)
    return total + intercepts.astype(F32) if intercepts is not None else total


def _batched_scores(scores: np.ndarray, transform: str) -> np.ndarray:
    """``batched_update_scores_inplace`` of several scores a row (MLAS for LOGISTIC, and
    for SOFTMAX over its sizes)."""
    if transform == "NONE":
        return scores
    if transform == "LOGISTIC":
        from openacl.model.host_contrib import mlas_logistic

        return mlas_logistic(scores)
    if transform == "SOFTMAX":
        classes = scores.shape[1]
        least = MLAS_SOFTMAX_MIN_SCORES.get(classes, 0)
        return _mlas_softmax(scores) if least is not None and scores.size >= least else \
            compute_softmax(scores)
    if transform == "SOFTMAX_ZERO":
        return compute_softmax_zero(scores)
    return compute_probit(scores)


def _linear_attributes(owner: Any) -> tuple[_Attributes, np.ndarray]:
    """A linear model's attributes (checked against its ``ATTRIBUTES``) and its
    coefficients, which it cannot lack."""
    attrs = _Attributes(owner, owner.ATTRIBUTES)
    coefficients = attrs.floats("coefficients")
    if not coefficients.size:
        raise owner.fail(ACL_ERROR_PARSE_MODEL, "needs the attribute 'coefficients'")
    return attrs, coefficients


class LinearClassifierNode(_HostNode):
    """ai.onnx.ml LinearClassifier as onnxruntime's CPU kernel."""

    ATTRIBUTES = frozenset({"classlabels_ints", "classlabels_strings", "coefficients",
                            "intercepts", "multi_class", "post_transform"})

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs, self.coefficients = _linear_attributes(self)
        self.intercepts = attrs.floats("intercepts")
        self.classes = self.intercepts.size
        if not self.classes:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            "has no 'intercepts': onnxruntime counts the classes by them")
        if attrs.has("classlabels_strings") and attrs.has("classlabels_ints"):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            "has both 'classlabels_strings' and 'classlabels_ints'")
        self.labels: list[Any] = attrs.strings("classlabels_strings")
        self.strings = bool(self.labels)  # onnxruntime: strings when there are some
        if not self.strings:
            self.labels = attrs.ints("classlabels_ints").tolist()
        self.transform = attrs.transform()
        attrs.int("multi_class", 0)  # onnxruntime reads it and uses it nowhere
        if self.classes == 1:
            if len(self.labels) not in (0, 2):
                raise self.fail(ACL_ERROR_PARSE_MODEL,
                                f"has one intercept and {len(self.labels)} labels; a binary "
                                f"classifier takes 2 labels (or none: 0 and 1)")
            self.second_class = len(self.labels) == 2
            if self.second_class and self.transform == "PROBIT":
                raise self.fail(ACL_ERROR_PARSE_MODEL,
                                "a binary LinearClassifier with PROBIT: onnxruntime leaves "
                                "half of its scores unwritten")
        elif len(self.labels) < self.classes:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"has {self.classes} intercepts but {len(self.labels)} labels")

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, Any]:
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype not in NUMERIC_INPUTS:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be float32, "
                            f"float64, int64 or int32")
        x = _matrix(self, x, name)
        scores = _gemm(self, x, self.coefficients, self.classes, self.intercepts, name)
        if self.classes == 1:
            positive = scores[:, 0] > 0
            index = positive.astype(np.int64)  # no labels: 1 and 0
            label = np.array(self.labels, object if self.strings else np.int64)[index] \
                if self.labels else index
            s = scores[:, 0]
            if self.second_class:
                if self.transform == "LOGISTIC":
                    p = compute_logistic(s)
                    z = np.stack([F32(1) - p, p], 1)
                else:
                    z = np.stack([F32(1) - s, s], 1)
            else:
                z = compute_probit(scores) if self.transform == "PROBIT" else scores
        else:
            best = np.zeros(x.shape[0], np.int64)
            top = scores[:, 0].copy()
            for k in range(1, self.classes):  # first strict maximum
                take = scores[:, k] > top
                best = np.where(take, k, best)
                top = np.where(take, scores[:, k], top)
            label = np.array(self.labels, object if self.strings else np.int64)[best] \
                if x.shape[0] else np.zeros(0, object if self.strings else np.int64)
            z = _batched_scores(scores, self.transform)
        outputs = list(self.node.output)
        result: dict[str, Any] = {}
        if outputs and outputs[0]:
            result[outputs[0]] = label
        if len(outputs) > 1 and outputs[1]:
            result[outputs[1]] = np.asarray(z, F32)
        return result


class LinearRegressorNode(_HostNode):
    """ai.onnx.ml LinearRegressor as onnxruntime's CPU kernel (float32 only)."""

    ATTRIBUTES = frozenset({"coefficients", "intercepts", "post_transform", "targets"})

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs, self.coefficients = _linear_attributes(self)
        self.targets = attrs.int("targets", 1)
        if self.targets <= 0:
            raise self.fail(ACL_ERROR_PARSE_MODEL, f"targets is {self.targets}; it must be > 0")
        intercepts = attrs.floats("intercepts")
        self.intercepts = intercepts if intercepts.size == self.targets else None
        self.transform = attrs.transform()

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype != F32 or x.ndim > 2:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be float32 of at "
                            f"most 2 dimensions")
        x = x.reshape(1, -1) if x.ndim < 2 else x
        scores = _gemm(self, x, self.coefficients, self.targets, self.intercepts, name)
        if self.targets > 1:
            scores = _batched_scores(scores, self.transform)
        elif self.transform == "PROBIT":
            scores = compute_probit(scores)
        return {self.node.output[0]: np.asarray(scores, F32)}


class NormalizerNode(_HostNode):
    """ai.onnx.ml Normalizer (MAX, L1, L2 along axis 1) in float32 as onnxruntime."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, frozenset({"norm"}))
        self.norm = attrs.string("norm", "MAX")
        if self.norm not in ("MAX", "L1", "L2"):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"norm {self.norm!r} is not one of 'MAX', 'L1', 'L2'")

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype not in NUMERIC_INPUTS or x.ndim not in (1, 2):
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be 1-d or 2-d "
                            f"float32, float64, int64 or int32")
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        values = rows.astype(F32)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            if self.norm == "MAX":
                top = np.max(np.where(values > F32(-FLT_MAX), values, F32(-FLT_MAX)), axis=1,
                             keepdims=True) if values.shape[1] else np.zeros((len(values), 1),
                                                                             F32)
                out = np.where(top != 0, values / top, values)
            elif self.norm == "L1":
                total = _row_sums(np.abs(rows).astype(F32))
                out = np.where(total != 0, values / total, values)
            else:
                squares = (rows * rows).astype(F32)
                total = _row_sums(squares)
                root = np.sqrt(squares / total)
                out = np.where(total != 0, np.where(rows < 0, -root, root), values)
        return {self.node.output[0]: out.astype(F32).reshape(x.shape)}


def _row_sums(values: np.ndarray) -> np.ndarray:
    """Sequential float32 sums along axis 1 (onnxruntime's loop), (rows, 1)."""
    if not values.shape[1]:
        return np.zeros((values.shape[0], 1), F32)
    return np.add.accumulate(values, axis=1, dtype=F32)[:, -1:]


class ScalerNode(_HostNode):
    """ai.onnx.ml Scaler: ``(x - offset) * scale`` in C++'s types, as float32."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, frozenset({"scale", "offset"}))
        self.scale, self.offset = attrs.floats("scale"), attrs.floats("offset")
        if not self.scale.size or self.scale.size != self.offset.size:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"scale has {self.scale.size} values and offset "
                            f"{self.offset.size}; they must be one non-zero length")

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype not in NUMERIC_INPUTS or x.ndim == 0:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be float32, "
                            f"float64, int64 or int32 of at least one dimension")
        stride = x.shape[0] if x.ndim == 1 else x.shape[1]
        size = self.scale.size
        if size != stride and size != 1:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}: scale and offset have "
                            f"{size} values; they must have {stride} (the features) or 1")
        kind = F64 if x.dtype == F64 else F32  # int - float is float in C++
        flat = x.reshape(-1, size).astype(kind)
        out = (flat - self.offset.astype(kind)) * self.scale.astype(kind)
        return {self.node.output[0]: out.astype(F32).reshape(x.shape)}


class BinarizerNode(_HostNode):
    """ai.onnx.ml Binarizer: ``x > threshold`` as 1/0 (float32 only); a NaN is an error."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        attrs = _Attributes(self, frozenset({"threshold"}))
        self.threshold = F32(attrs.float("threshold", 0.0))

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        name = self.node.input[0]
        x = np.asarray(self.value(name, env))
        if x.dtype != F32:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} is {_describe(x)}; it must be float32")
        nan = np.flatnonzero(np.isnan(x.reshape(-1)))
        if nan.size:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {name!r} holds NaN (flat index {nan[0]})")
        return {self.node.output[0]: (x > self.threshold).astype(F32)}


class ArrayFeatureExtractorNode(_HostNode):
    """ai.onnx.ml ArrayFeatureExtractor: X's last axis at the indices Y (1-d X: [1, k])."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        _Attributes(self, frozenset())

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = self.node.input
        x, y = np.asarray(self.value(names[0], env)), np.asarray(self.value(names[1], env))
        if x.ndim == 0 or not (x.dtype in NUMERIC_INPUTS or x.dtype.kind in "OU"):
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input X {names[0]!r} is {_describe(x)}; it must be float32, "
                            f"float64, int64, int32 or string of at least one dimension")
        indices = y.reshape(-1)
        stride = x.shape[-1]
        if y.dtype != np.int64 or not indices.size or np.any((indices < 0) |
                                                             (indices >= stride)):
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"input Y {names[1]!r} is {_describe(y)} {indices[:8].tolist()}; "
                            f"it must be int64 indices, at least one, each in [0, {stride})")
        out = np.take(x, indices, axis=-1)
        return {self.node.output[0]: out.reshape(1, -1) if x.ndim == 1 else out}


ML_OPS: dict[str, type[_HostNode]] = {
    "TreeEnsembleRegressor": TreeEnsembleRegressorNode,
    "TreeEnsembleClassifier": TreeEnsembleClassifierNode,
    "TreeEnsemble": TreeEnsembleNode,
    "ZipMap": ZipMapNode,
    "LinearClassifier": LinearClassifierNode,
    "LinearRegressor": LinearRegressorNode,
    "Normalizer": NormalizerNode,
    "Scaler": ScalerNode,
    "Binarizer": BinarizerNode,
    "ArrayFeatureExtractor": ArrayFeatureExtractorNode,
}
