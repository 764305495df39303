"""Loss operators and their backward operators against PyTorch CPU, with CANN's precision
standard: goldens are torch's results computed in float64 and rounded once to the output's
dtype; backward operators are checked against torch.autograd of the forward loss.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import FLOATS, TORCH_DTYPES, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
# torch warns that kl_div's 'mean' is not batchmean: CANN's 1 is that same elementwise mean
pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")
INT32, INT64 = np.dtype(np.int32), np.dtype(np.int64)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _wide(array) -> torch.Tensor:
    """A float64 (int64, bool) torch tensor of ``array``'s values."""
    tensor = to_torch(array)
    if tensor.dtype.is_floating_point:
        return tensor.to(torch.float64)
    return tensor if tensor.dtype == torch.bool else tensor.to(torch.int64)


def _rounded(tensor: torch.Tensor, dtype) -> np.ndarray:
    return from_torch(tensor.detach().to(TORCH_DTYPES[np.dtype(dtype)]))


def _fails(call, code=ACLNN_ERR_PARAM_INVALID, argument=None):
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == code, info.value.message
    if argument is not None:
        assert f"'{argument}'" in info.value.message, info.value.message


def _fails_in_kernel(name, *args, match=""):
    stream = openacl.rt.create_stream()
    workspace_size, executor = getattr(aclnn, f"{name}_get_workspace_size")(*args)
    getattr(aclnn, name)(0, workspace_size, executor, stream)
    try:
        with pytest.raises(AclError) as info:
            openacl.rt.synchronize_stream(stream)
    finally:
        openacl.rt.destroy_stream_force(stream)
    assert match in info.value.message, info.value.message


# -- pointwise losses ---------------------------------------------------------------------------
# one-shot name -> (extra attributes after reduction, torch loss(x, y, reduction), ranges)
POINTWISE = {
    "mse_loss": ((), lambda x, y, r: F.mse_loss(x, y, reduction=r), (-1, 1), (-1, 1)),
    "l1_loss": ((), lambda x, y, r: F.l1_loss(x, y, reduction=r), (-5, 5), (-3, 3)),
    "smooth_l1_loss": ((1.0,), lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=1.0),
                       (-5, 5), (-5, 5)),
    "soft_margin_loss": ((), lambda x, y, r: F.soft_margin_loss(x, y, reduction=r),
                         (-5, 5), (-5, 5)),
    "kl_div": ((False,), lambda x, y, r: F.kl_div(x, y, reduction=r), (-5, 5), (0, 2)),
}


@pytest.mark.parametrize("name", sorted(POINTWISE))
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pointwise_losses_match_torch(name, reduction, dtype):
    attributes, reference, x_range, y_range = POINTWISE[name]
    rng = np.random.default_rng(3)
    x = random_array((4, 9), dtype, rng, *x_range)
    y = random_array((4, 9), dtype, rng, *y_range)
    ours = getattr(openacl.ops, name)(_dev(x), _dev(y), reduction, *attributes).numpy()
    golden = _rounded(reference(_wide(x), _wide(y), REDUCTIONS[reduction]), dtype)
    assert_close(ours, golden, f"{name} {REDUCTIONS[reduction]}")


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "soft_margin_loss", "kl_div"])
def test_pointwise_losses_broadcast_and_promote(name):
    attributes, reference, x_range, y_range = POINTWISE[name]
    rng = np.random.default_rng(5)
    x = random_array((3, 1, 5), np.float16, rng, *x_range)
    y = random_array((4, 1), np.float32, rng, *y_range)
    ours = getattr(openacl.ops, name)(_dev(x), _dev(y), 0, *attributes).numpy()
    wide_x, wide_y = torch.broadcast_tensors(_wide(x), _wide(y))
    assert_close(ours, _rounded(reference(wide_x, wide_y, "none"), np.float32), name)


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0])
def test_smooth_l1_loss_beta(beta):
    rng = np.random.default_rng(6)
    x, y = (random_array((50,), np.float32, rng) for _ in range(2))
    ours = openacl.ops.smooth_l1_loss(_dev(x), _dev(y), 0, beta).numpy()
    golden = F.smooth_l1_loss(_wide(x), _wide(y), reduction="none", beta=beta)
    assert_close(ours, _rounded(golden, np.float32))


@pytest.mark.parametrize("reduction", [0, 1, 2, 3])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_batchmean_and_log_target(reduction, log_target):
    rng = np.random.default_rng(7)
    x = random_array((5, 6), np.float32, rng, -3, 0)
    y = random_array((5, 6), np.float32, rng, -3, 0) if log_target else \
        random_array((5, 6), np.float32, rng, 0, 1)
    y[0, 0] = -np.inf if log_target else 0.0  # a zero probability adds 0
    ours = openacl.ops.kl_div(_dev(x), _dev(y), reduction, log_target).numpy()
    name = {0: "none", 1: "mean", 2: "sum", 3: "batchmean"}[reduction]
    golden = F.kl_div(_wide(x), _wide(y), reduction=name, log_target=log_target)
    assert_close(ours, _rounded(golden, np.float32), name)


def test_l1_loss_int64():
    rng = np.random.default_rng(8)
    x, y = (random_array((3, 4), np.int64, rng, -50, 50) for _ in range(2))
    for reduction in (0, 2):
        ours = openacl.ops.l1_loss(_dev(x), _dev(y), reduction).numpy()
        golden = F.l1_loss(torch.from_numpy(x).double(), torch.from_numpy(y).double(),
                           reduction=REDUCTIONS[reduction]).to(torch.int64).numpy()
        np.testing.assert_array_equal(ours, golden)
    mixed = openacl.ops.l1_loss(_dev(x), _dev(y.astype(np.float32)), 1).numpy()
    assert_close(mixed, np.float32(np.abs(x - y).mean()))
    _fails(lambda: openacl.ops.l1_loss(_dev(x), _dev(y), 1), argument="reduction")


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mse_loss_out_reduces_dim_0(reduction, dtype):
    rng = np.random.default_rng(4)
    x = random_array((5, 3, 4), dtype, rng, -1, 1)
    y = random_array((3, 1), dtype, rng, -1, 1)
    ours = openacl.ops.mse_loss_out(_dev(x), _dev(y), reduction).numpy()
    squared = F.mse_loss(*torch.broadcast_tensors(_wide(x), _wide(y)), reduction="none")
    golden = {0: squared, 1: squared.mean(0), 2: squared.sum(0)}[reduction]
    assert_close(ours, _rounded(golden, dtype), f"mse_loss_out {REDUCTIONS[reduction]}")
    _fails(lambda: openacl.ops.mse_loss_out(_dev(np.float32(1)), _dev(np.float32(2)), 1),
           argument="self")


def test_reduced_loss_fits_a_one_element_out():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = openacl.empty((1,), np.float32)
    self, target = _dev(x), _dev(np.zeros_like(x))
    size, executor = aclnn.mse_loss_get_workspace_size(self, target, 2, out)
    aclnn.mse_loss(0, size, executor, None)
    openacl.rt.synchronize_device()
    np.testing.assert_array_equal(out.numpy(), [55.0])


def test_empty_mean_is_nan_and_sum_zero():
    empty = _dev(np.zeros((0, 3), np.float32))
    assert np.isnan(openacl.ops.mse_loss(empty, empty, 1).numpy())
    assert openacl.ops.mse_loss(empty, empty, 2).numpy() == 0.0


# -- binary cross entropy -----------------------------------------------------------------------
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_cross_entropy_matches_torch(reduction, dtype):
    rng = np.random.default_rng(9)
    x = random_array((6, 7), dtype, rng, 0, 1)
    x[0, :2] = (0.0, 1.0)  # torch clamps each log at -100
    t = random_array((6, 7), dtype, rng, 0, 1)
    w = random_array((6, 7), dtype, rng, -1, 1)
    for weight in (None, w):
        ours = openacl.ops.binary_cross_entropy(
            _dev(x), _dev(t), None if weight is None else _dev(weight), reduction).numpy()
        golden = F.binary_cross_entropy(_wide(x), _wide(t), None if weight is None else
                                        _wide(weight), reduction=REDUCTIONS[reduction])
        assert_close(ours, _rounded(golden, dtype), f"bce weight={weight is not None}")


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_cross_entropy_with_logits_matches_torch(reduction, dtype):
    rng = np.random.default_rng(10)
    x = random_array((5, 8), dtype, rng, -30, 30)
    t = random_array((5, 8), dtype, rng, 0, 1)
    w = random_array((8,), dtype, rng, -1, 1)
    p = random_array((5, 8), dtype, rng, 0, 2)
    for weight, pos in ((None, None), (w, None), (None, p), (w, p)):
        ours = openacl.ops.binary_cross_entropy_with_logits(
            _dev(x), _dev(t), None if weight is None else _dev(weight),
            None if pos is None else _dev(pos), reduction).numpy()
        golden = F.binary_cross_entropy_with_logits(
            _wide(x), _wide(t), None if weight is None else _wide(weight),
            reduction=REDUCTIONS[reduction], pos_weight=None if pos is None else _wide(pos))
        assert_close(ours, _rounded(golden, dtype), "bce with logits")


# -- Logit ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.1, 0.5])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_logit_matches_torch(eps, dtype):
    x = random_array((40,), dtype, np.random.default_rng(11), 0, 1)
    x[:3] = (0.0, 1.0, 0.5)
    ours = openacl.ops.logit(_dev(x), eps).numpy()
    golden = torch.logit(_wide(x), None if eps < 0 else eps)
    assert_close(ours, _rounded(golden, dtype), f"logit eps={eps}")


# -- class-index losses ------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("target_dtype", [np.int64, np.int32, np.uint8], ids=str)
def test_nll_loss_matches_torch(reduction, dtype, target_dtype):
    rng = np.random.default_rng(12)
    x = random_array((6, 5), dtype, rng, -4, 0)
    target = np.array([0, 4, 2, 3, 2, 1], target_dtype)
    w = random_array((5,), dtype, rng, 0, 2)
    ignore = 2
    loss, total = openacl.ops.nll_loss(_dev(x), _dev(target), _dev(w), reduction, ignore)
    golden, golden_total = torch.ops.aten.nll_loss_forward(
        _wide(x), torch.from_numpy(target.astype(np.int64)), _wide(w), reduction, ignore)
    assert_close(loss.numpy(), _rounded(golden, dtype), "nll loss")
    assert_close(total.numpy(), _rounded(golden_total, dtype), "total weight")


def test_nll_loss_one_sample_and_2d():
    rng = np.random.default_rng(13)
    x = random_array((5,), np.float32, rng, -4, 0)
    w = random_array((5,), np.float32, rng, 0, 2)
    for reduction in (0, 1, 2):
        loss, total = openacl.ops.nll_loss(_dev(x), _dev(np.array(3)), _dev(w), reduction, -100)
        golden, golden_total = torch.ops.aten.nll_loss_forward(
            _wide(x), torch.tensor(3), _wide(w), reduction, -100)
        assert_close(loss.numpy(), _rounded(golden, np.float32))
        assert_close(total.numpy(), _rounded(golden_total, np.float32))
    images = random_array((2, 4, 3, 5), np.float32, rng, -4, 0)
    labels = rng.integers(0, 4, (2, 3, 5))
    labels[0, 0, 0] = -1
    w4 = random_array((4,), np.float32, rng, 0, 2)
    for reduction in (0, 1, 2):
        loss, total = openacl.ops.nll_loss2d(_dev(images), _dev(labels), _dev(w4), reduction, -1)
        golden, golden_total = torch.ops.aten.nll_loss2d_forward(
            _wide(images), torch.from_numpy(labels), _wide(w4), reduction, -1)
        assert_close(loss.numpy(), _rounded(golden, np.float32), "nll loss 2d")
        assert_close(total.numpy(), _rounded(golden_total, np.float32), "nll 2d total")


def test_nll_loss_target_out_of_range_fails_in_the_kernel():
    x = _dev(np.zeros((3, 4), np.float32))
    w = _dev(np.ones(4, np.float32))
    target = _dev(np.array([0, 4, 1]))
    out, total = openacl.empty((), np.float32), openacl.empty((), np.float32)
    _fails_in_kernel("nll_loss", x, target, w, 1, -100, out, total,
                     match="aclnnNLLLoss: argument 'target' holds index 4")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cross_entropy_loss_matches_torch(reduction, dtype):
    rng = np.random.default_rng(14)
    x = random_array((7, 6), dtype, rng, -5, 5)
    target = np.array([0, 5, 2, -1, 3, 3, 1], np.int64)
    w = random_array((6,), np.float32, rng, 0, 1)
    for weight, smoothing in ((None, 0.0), (w, 0.0), (None, 0.3), (w, 0.2)):
        loss, log_prob, zloss, lse = openacl.ops.cross_entropy_loss(
            _dev(x), _dev(target), None if weight is None else _dev(weight), reduction, -1,
            smoothing, 0.0, False)
        golden = F.cross_entropy(_wide(x), torch.from_numpy(target),
                                 None if weight is None else _wide(weight), ignore_index=-1,
                                 reduction=reduction, label_smoothing=smoothing)
        what = f"cross entropy weight={weight is not None} smoothing={smoothing}"
        assert_close(loss.numpy(), _rounded(golden, dtype), what)
        assert_close(log_prob.numpy(), _rounded(torch.log_softmax(_wide(x), 1), dtype), what)
        assert_close(lse.numpy(), _rounded(torch.logsumexp(_wide(x), 1), dtype), what)


def test_cross_entropy_zloss():
    rng = np.random.default_rng(15)
    x = random_array((5, 4), np.float32, rng, -3, 3)
    target = np.array([0, 1, -100, 3, 2], np.int64)
    lse = torch.logsumexp(_wide(x), 1)
    counted = torch.from_numpy(target != -100)
    for reduction, golden in (("none", 0.5 * lse ** 2 * counted),
                              ("sum", (0.5 * lse ** 2 * counted).sum()),
                              ("mean", (0.5 * lse ** 2 * counted).sum() / counted.sum())):
        _, _, zloss, _ = openacl.ops.cross_entropy_loss(_dev(x), _dev(target), None, reduction,
                                                        -100, 0.0, 0.5, True)
        assert_close(zloss.numpy(), _rounded(golden, np.float32), reduction)


def test_softmax_cross_entropy_with_logits_matches_torch():
    for dtype in FLOATS:
        rng = np.random.default_rng(16)
        x = random_array((4, 9), dtype, rng, -8, 8)
        labels = random_array((4, 9), dtype, rng, 0, 1)
        loss, backprop = openacl.ops.softmax_cross_entropy_with_logits(_dev(x), _dev(labels))
        wide_x, wide_labels = _wide(x), _wide(labels)
        golden = -(wide_labels * torch.log_softmax(wide_x, 1)).sum(1)
        # TensorFlow's backprop (CANN's formula): the gradient when each label row sums to 1
        golden_backprop = torch.softmax(wide_x, 1) - wide_labels
        assert_close(loss.numpy(), _rounded(golden, dtype), f"loss {dtype}")
        assert_close(backprop.numpy(), _rounded(golden_backprop, dtype), f"backprop {dtype}")


# -- backward operators against torch.autograd -------------------------------------------------
def _autograd(loss_fn, grad, *inputs):
    """d loss_fn(*inputs) / d inputs[0] for an upstream gradient ``grad`` (float64)."""
    first = inputs[0].clone().requires_grad_()
    loss = loss_fn(first, *inputs[1:])
    loss.backward(grad.reshape(()).expand_as(loss) if grad.numel() == 1 else grad)
    return first.grad


POINTWISE_BACKWARD = {  # one-shot name -> (forward name in POINTWISE, extra attributes)
    "mse_loss_backward": ("mse_loss", ()),
    "l1_loss_backward": ("l1_loss", ()),
    "smooth_l1_loss_backward": ("smooth_l1_loss", (1.0,)),
    "soft_margin_loss_backward": ("soft_margin_loss", ()),
    "kl_div_backward": ("kl_div", (False,)),
}


@pytest.mark.parametrize("name", sorted(POINTWISE_BACKWARD))
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pointwise_backward_matches_autograd(name, reduction, dtype):
    forward, attributes = POINTWISE_BACKWARD[name]
    _, reference, x_range, y_range = POINTWISE[forward]
    rng = np.random.default_rng(17)
    x = random_array((3, 8), dtype, rng, *x_range)
    y = random_array((3, 8), dtype, rng, *y_range)
    grad = random_array((3, 8) if reduction == 0 else (), dtype, rng, -5, 5)
    ours = getattr(openacl.ops, name)(_dev(grad), _dev(x), _dev(y), reduction,
                                      *attributes).numpy()
    golden = _autograd(lambda a, b: reference(a, b, REDUCTIONS[reduction]), _wide(grad),
                       _wide(x), _wide(y))
    assert_close(ours, _rounded(golden, dtype), f"{name} {REDUCTIONS[reduction]}")


@pytest.mark.parametrize("reduction", [1, 3])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_backward_batchmean_log_target(reduction, log_target):
    rng = np.random.default_rng(18)
    x = random_array((4, 5), np.float32, rng, -3, 0)
    y = random_array((4, 5), np.float32, rng, -3, 1)
    grad = np.float32(1.5)
    ours = openacl.ops.kl_div_backward(_dev(grad), _dev(x), _dev(y), reduction,
                                       log_target).numpy()
    name = {1: "mean", 3: "batchmean"}[reduction]
    golden = _autograd(lambda a, b: F.kl_div(a, b, reduction=name, log_target=log_target),
                       _wide(grad), _wide(x), _wide(y))
    assert_close(ours, _rounded(golden, np.float32), name)


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_smooth_l1_loss_backward_beta(beta):
    rng = np.random.default_rng(19)
    x, y, grad = (random_array((30,), np.float32, rng) for _ in range(3))
    ours = openacl.ops.smooth_l1_loss_backward(_dev(grad), _dev(x), _dev(y), 0, beta).numpy()
    golden = _autograd(lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=beta),
                       _wide(grad), _wide(x), _wide(y))
    assert_close(ours, _rounded(golden, np.float32))


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_cross_entropy_backward_matches_autograd(reduction, dtype):
    rng = np.random.default_rng(20)
    x = random_array((4, 6), dtype, rng, 0.05, 0.95)
    t = random_array((4, 6), dtype, rng, 0, 1)
    w = random_array((4, 6), dtype, rng, -1, 1)
    grad = random_array((4, 6) if reduction == 0 else (1,), dtype, rng, -2, 2)
    for weight in (None, w):
        ours = openacl.ops.binary_cross_entropy_backward(
            _dev(grad), _dev(x), _dev(t), None if weight is None else _dev(weight),
            reduction).numpy()
        golden = _autograd(
            lambda a, b, w=weight: F.binary_cross_entropy(a, b, None if w is None else _wide(w),
                                                     reduction=REDUCTIONS[reduction]),
            _wide(grad), _wide(x), _wide(t))
        assert_close(ours, _rounded(golden, dtype), "bce backward")


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_cross_entropy_with_logits_backward_matches_autograd(reduction, dtype):
    rng = np.random.default_rng(21)
    x = random_array((4, 6), dtype, rng, -5, 5)
    t = random_array((4, 6), dtype, rng, 0, 1)
    w = random_array((6,), dtype, rng, -1, 1)
    p = random_array((4, 6), dtype, rng, 0, 2)
    grad = random_array((4, 6) if reduction == 0 else (1,), dtype, rng, -2, 2)
    for weight, pos in ((None, None), (w, p)):
        ours = openacl.ops.binary_cross_entropy_with_logits_backward(
            _dev(grad), _dev(x), _dev(t), None if weight is None else _dev(weight),
            None if pos is None else _dev(pos), reduction).numpy()
        golden = _autograd(
            lambda a, b, w=weight, p=pos: F.binary_cross_entropy_with_logits(
                a, b, None if w is None else _wide(w),
                reduction=REDUCTIONS[reduction], pos_weight=None if p is None else _wide(p)),
            _wide(grad), _wide(x), _wide(t))
        assert_close(ours, _rounded(golden, dtype), "bce with logits backward")


@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.2])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_logit_grad_matches_autograd(eps, dtype):
    rng = np.random.default_rng(22)
    x = random_array((30,), dtype, rng, 0, 1)
    dy = random_array((30,), dtype, rng, -100, 100)
    ours = openacl.ops.logit_grad(_dev(x), _dev(dy), eps).numpy()
    golden = _autograd(lambda a: torch.logit(a, None if eps < 0 else eps), _wide(dy), _wide(x))
    assert_close(ours, _rounded(golden, dtype), f"logit grad eps={eps}")


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nll_loss_backward_matches_autograd(reduction, dtype):
    rng = np.random.default_rng(23)
    x = random_array((6, 5), dtype, rng, -4, 0)
    target = np.array([0, 4, 2, 3, 2, 1])
    w = random_array((5,), dtype, rng, 0, 2)
    grad = random_array((6,) if reduction == 0 else (), dtype, rng, -3, 3)
    total = (w.astype(np.float64)[target] * (target != 2)).sum().astype(dtype).reshape(1)
    ours = openacl.ops.nll_loss_backward(_dev(grad), _dev(x), _dev(target), _dev(w), reduction,
                                         2, _dev(total)).numpy()
    golden = _autograd(lambda a: F.nll_loss(a, torch.from_numpy(target), _wide(w),
                                            ignore_index=2, reduction=REDUCTIONS[reduction]),
                       _wide(grad), _wide(x))
    assert_close(ours, _rounded(golden, dtype), "nll backward")


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_nll_loss2d_backward_matches_autograd(reduction):
    rng = np.random.default_rng(24)
    x = random_array((2, 4, 3, 5), np.float32, rng, -4, 0)
    target = rng.integers(0, 4, (2, 3, 5))
    target[1, 2, 3] = -100
    w = random_array((4,), np.float32, rng, 0, 2)
    grad = random_array((2, 3, 5) if reduction == 0 else (1,), np.float32, rng, -3, 3)
    total = np.array([(w.astype(np.float64)[np.maximum(target, 0)] * (target >= 0)).sum()],
                     np.float32)
    ours = openacl.ops.nll_loss2d_backward(_dev(grad), _dev(x), _dev(target), _dev(w),
                                           reduction, -100, _dev(total)).numpy()
    golden = _autograd(lambda a: F.nll_loss(a, torch.from_numpy(target), _wide(w),
                                            reduction=REDUCTIONS[reduction]),
                       _wide(grad), _wide(x))
    assert_close(ours, _rounded(golden, np.float32), "nll 2d backward")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cross_entropy_loss_grad_matches_autograd(reduction, dtype):
    rng = np.random.default_rng(25)
    x = random_array((7, 6), dtype, rng, -5, 5)
    log_prob = _rounded(torch.log_softmax(_wide(x), 1), dtype)
    target = np.array([0, 5, 2, -3, 3, 3, 1], np.int64)
    w = random_array((6,), np.float32, rng, 0, 1)
    grad = random_array((7,) if reduction == "none" else (), dtype, rng, -3, 3)
    for weight, smoothing in ((None, 0.0), (w, 0.0), (w, 0.25)):
        ours = openacl.ops.cross_entropy_loss_grad(
            _dev(grad), _dev(log_prob), _dev(target), None if weight is None else _dev(weight),
            None, None, reduction, -3, smoothing, 0.0).numpy()
        golden = _autograd(
            lambda a, w=weight, s=smoothing: F.cross_entropy(
                a, torch.from_numpy(target), None if w is None else _wide(w), ignore_index=-3,
                reduction=reduction, label_smoothing=s),
            _wide(grad), _wide(log_prob))  # (log_softmax of log_prob is log_prob)
        assert_close(ours, _rounded(golden, dtype), f"ce grad smoothing={smoothing}")


def test_cross_entropy_loss_grad_zloss_matches_autograd():
    rng = np.random.default_rng(26)
    x = random_array((5, 4), np.float32, rng, -3, 3)
    target = np.array([0, 1, -100, 3, 2], np.int64)
    scale = 0.3
    lse = torch.logsumexp(_wide(x), 1)

    def total(a):  # the summed loss plus the summed z-loss, both of logits a
        counted = torch.from_numpy(target != -100)
        zloss = (scale * torch.logsumexp(a, 1) ** 2 * counted).sum()
        return F.cross_entropy(a, torch.from_numpy(target), reduction="sum") + zloss

    golden = _autograd(total, torch.tensor(1.0, dtype=torch.float64), _wide(x))
    log_prob = _rounded(torch.log_softmax(_wide(x), 1), np.float32)
    ours = openacl.ops.cross_entropy_loss_grad(
        _dev(np.float32(1.0)), _dev(log_prob), _dev(target), None, None,
        _dev(_rounded(lse, np.float32)), "sum", -100, 0.0, scale).numpy()
    assert_close(ours, _rounded(golden, np.float32), "z-loss grad")


# -- bad inputs ---------------------------------------------------------------------------------
def test_null_tensors_refused():
    x = _dev(np.zeros((2, 3), np.float32))
    out = openacl.empty((2, 3), np.float32)
    for call in (lambda: aclnn.mse_loss_get_workspace_size(None, x, 0, out),
                 lambda: aclnn.l1_loss_get_workspace_size(x, None, 0, out),
                 lambda: aclnn.binary_cross_entropy_get_workspace_size(x, x, None, 0, None),
                 lambda: aclnn.nll_loss_get_workspace_size(x, _dev(np.zeros(2, np.int64)),
                                                           None, 1, -100, out, out),
                 lambda: aclnn.mse_loss_backward_get_workspace_size(x, None, x, 0, out)):
        _fails(call, ACLNN_ERR_PARAM_NULLPTR)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "soft_margin_loss",
                                  "kl_div"])
def test_unsupported_dtype_refused(name):
    bad = _dev(np.ones((2, 3), np.int32))
    _fails(lambda: getattr(openacl.ops, name)(bad, bad, 1), argument="self")


def test_bad_shapes_and_attributes_refused():
    x = _dev(np.ones((2, 3), np.float32))
    _fails(lambda: openacl.ops.mse_loss(x, _dev(np.ones((4,), np.float32)), 0),
           argument="target")
    _fails(lambda: openacl.ops.mse_loss(x, x, 3), argument="reduction")
    _fails(lambda: openacl.ops.mse_loss(x, x, -1), argument="reduction")
    _fails(lambda: openacl.ops.kl_div(x, x, 4, False), argument="reduction")
    _fails(lambda: openacl.ops.smooth_l1_loss(x, x, 1, -0.5), argument="beta")
    _fails(lambda: openacl.ops.binary_cross_entropy(x, _dev(np.ones((3,), np.float32))),
           argument="target")
    _fails(lambda: openacl.ops.binary_cross_entropy(x, x, _dev(np.ones((4,), np.float32))),
           argument="weight")
    _fails(lambda: openacl.ops.binary_cross_entropy(x, _dev(np.ones((2, 3), np.int32))),
           argument="target")
    _fails(lambda: openacl.ops.mse_loss_backward(_dev(np.ones((2, 3), np.float16)), x, x, 0),
           argument="gradOutput")
    labels = _dev(np.zeros(2, np.int64))
    _fails(lambda: openacl.ops.nll_loss(x, labels, _dev(np.ones(4, np.float32))),
           argument="weight")
    _fails(lambda: openacl.ops.nll_loss(x, _dev(np.zeros(3, np.int64)),
                                        _dev(np.ones(3, np.float32))), argument="target")
    _fails(lambda: openacl.ops.nll_loss(x, _dev(np.zeros(2, np.float32)),
                                        _dev(np.ones(3, np.float32))), argument="target")
    _fails(lambda: openacl.ops.cross_entropy_loss(x, labels, None, "avg"),
           argument="reductionOptional")
    _fails(lambda: openacl.ops.cross_entropy_loss(x, labels, None, "mean", -100, 1.5),
           argument="labelSmoothing")
    _fails(lambda: openacl.ops.cross_entropy_loss(x, labels, _dev(np.ones(3, np.float16))),
           argument="weightOptional")
    _fails(lambda: openacl.ops.softmax_cross_entropy_with_logits(x, _dev(np.ones((3, 2),
                                                                               np.float32))),
           argument="labels")
    _fails(lambda: openacl.ops.logit_grad(x, _dev(np.ones((3,), np.float32))), argument="dy")
    _fails(lambda: openacl.ops.nll_loss_backward(
        _dev(np.ones((2,), np.float32)), x, labels, _dev(np.ones(3, np.float32)), 1, -100,
        _dev(np.ones(1, np.float32))), argument="gradOutput")


# -- MultilabelMarginLoss, FusedCrossEntropyLossWithMaxSum, ChamferDistanceBackward ------------
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_multilabel_margin_loss_matches_torch(reduction, dtype):
    rng = np.random.default_rng(27)
    x = random_array((4, 6), dtype, rng, -2, 2)
    target = np.array([[3, 0, -1, 1, 2, 2], [5, 5, -1, 0, 0, 0], [-1, 0, 0, 0, 0, 0],
                       [0, 1, 2, 3, 4, 5]])
    loss, is_target = openacl.ops.multilabel_margin_loss(_dev(x), _dev(target), reduction)
    golden, golden_mask = torch.ops.aten.multilabel_margin_loss_forward(
        _wide(x), torch.from_numpy(target), reduction)
    assert_close(loss.numpy(), _rounded(golden, dtype), "multilabel margin")
    assert_close(is_target.numpy(), _rounded(golden_mask, dtype), "is target")
    one, _ = openacl.ops.multilabel_margin_loss(_dev(x[0]), _dev(target[0]), reduction)
    golden_one, _ = torch.ops.aten.multilabel_margin_loss_forward(
        _wide(x[0]), torch.from_numpy(target[0]), reduction)
    assert_close(one.numpy(), _rounded(golden_one, dtype), "one sample")


def test_multilabel_margin_loss_refuses_bad_labels():
    x = _dev(np.zeros((2, 3), np.float32))
    _fails(lambda: openacl.ops.multilabel_margin_loss(x, _dev(np.zeros((2, 2), np.int64))),
           argument="target")
    _fails(lambda: openacl.ops.multilabel_margin_loss(x, _dev(np.zeros((2, 3), np.float32))),
           argument="target")
    out, mask = openacl.empty((), np.float32), openacl.empty((2, 3), np.float32)
    target = _dev(np.array([[0, 3, -1], [1, -1, 0]]))
    _fails_in_kernel("multilabel_margin_loss", x, target, 1, out, mask,
                     match="argument 'target' holds index 3")


def test_fused_cross_entropy_loss_with_max_sum_matches_its_formula():
    rng = np.random.default_rng(28)
    logits = random_array((5, 7), np.float32, rng, -5, 5).astype(np.float64)
    target = np.array([0, 6, 3, 3, 1])
    top = logits.max(1)
    sum_exp = np.exp(logits - top[:, None]).sum(1)
    predicted = logits[np.arange(5), target] - top
    for dtype in FLOATS:
        loss, softmax = openacl.ops.fused_cross_entropy_loss_with_max_sum(
            _dev(top.astype(np.float32)), _dev(sum_exp.astype(np.float32)),
            _dev(predicted.astype(np.float32)), 0.0, None, None, _dev(logits.astype(dtype)))
        golden = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(target),
                                 reduction="none")
        assert_close(loss.numpy(), _rounded(golden, np.float32), "loss")
        rounded = _wide(logits.astype(dtype))
        golden_softmax = torch.exp(rounded - torch.from_numpy(top)[:, None]) / \
            torch.from_numpy(sum_exp)[:, None]
        assert_close(softmax.numpy(), _rounded(golden_softmax, np.float32), f"softmax {dtype}")
    alone = openacl.ops.fused_cross_entropy_loss_with_max_sum(
        _dev(top.astype(np.float32)), _dev(sum_exp.astype(np.float32)),
        _dev(predicted.astype(np.float32)))
    assert not isinstance(alone, tuple) and alone.numpy().shape == (5,)
    _fails(lambda: openacl.ops.fused_cross_entropy_loss_with_max_sum(
        _dev(top.astype(np.float32)), _dev(sum_exp.astype(np.float32)),
        _dev(predicted.astype(np.float32)), 0.1), argument="labelSmoothing")


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=str)
def test_chamfer_distance_backward_matches_autograd(dtype):
    rng = np.random.default_rng(29)
    xyz1 = random_array((2, 5, 2), dtype, rng, -5, 5)
    xyz2 = random_array((2, 7, 2), dtype, rng, -5, 5)
    p1, p2 = _wide(xyz1).requires_grad_(), _wide(xyz2).requires_grad_()
    squared = ((p1[:, :, None, :] - p2[:, None, :, :]) ** 2).sum(-1)  # (B, N, M)
    idx1, idx2 = squared.argmin(2), squared.argmin(1)
    dist1 = squared.gather(2, idx1[:, :, None])[:, :, 0]
    dist2 = squared.gather(1, idx2[:, None, :])[:, 0, :]
    g1 = random_array((2, 5), dtype, rng, -5, 5)
    g2 = random_array((2, 7), dtype, rng, -5, 5)
    ((dist1 * _wide(g1)).sum() + (dist2 * _wide(g2)).sum()).backward()
    grad1, grad2 = openacl.ops.chamfer_distance_backward(
        _dev(xyz1), _dev(xyz2), _dev(idx1.numpy().astype(np.int32)),
        _dev(idx2.numpy().astype(np.int32)), _dev(g1), _dev(g2))
    assert_close(grad1.numpy(), _rounded(p1.grad, dtype), "grad xyz1")
    assert_close(grad2.numpy(), _rounded(p2.grad, dtype), "grad xyz2")
    _fails(lambda: openacl.ops.chamfer_distance_backward(
        _dev(xyz1), _dev(xyz2), _dev(idx1.numpy()), _dev(idx2.numpy().astype(np.int32)),
        _dev(g1), _dev(g2)), argument="idx1")


# -- CtcLoss -----------------------------------------------------------------------------------
CTC_TARGETS = np.array([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 4, 0], [2, 0, 0, 0]])
CTC_INPUT_LENGTHS, CTC_TARGET_LENGTHS = [8, 6, 7, 3], [4, 2, 3, 0]


def _ctc_log_probs(dtype, steps=8, batch=4, classes=5):
    logits = random_array((steps, batch, classes), np.float64, np.random.default_rng(30))
    return torch.log_softmax(torch.from_numpy(logits), 2).numpy().astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_matches_torch(dtype, zero_infinity):
    log_probs = _ctc_log_probs(dtype)
    lengths = list(CTC_INPUT_LENGTHS)
    lengths[2] = 2  # three labels 4, 4, 4 need 5 steps: an impossible alignment, inf
    nll, log_alpha = openacl.ops.ctc_loss(_dev(log_probs), _dev(CTC_TARGETS), lengths,
                                          CTC_TARGET_LENGTHS, 0, zero_infinity)
    golden, golden_alpha = torch.ops.aten._ctc_loss(
        _wide(log_probs), torch.from_numpy(CTC_TARGETS), lengths, CTC_TARGET_LENGTHS, 0,
        zero_infinity)
    if zero_infinity:  # (aten's _ctc_loss leaves that to F.ctc_loss; CANN's op does it)
        golden = torch.where(golden == np.inf, 0.0, golden)
    assert_close(nll.numpy(), _rounded(golden, dtype), "nll")
    alpha = log_alpha.numpy()
    assert alpha.shape == tuple(golden_alpha.shape)
    for n, (steps, labels) in enumerate(zip(lengths, CTC_TARGET_LENGTHS, strict=True)):
        valid = golden_alpha[n, :steps, :2 * labels + 1]  # torch leaves the rest unset
        assert_close(alpha[n, :steps, :2 * labels + 1], _rounded(valid, dtype), f"alpha {n}")
        assert np.all(np.isneginf(alpha[n, steps:].astype(np.float64)))


def test_ctc_loss_concatenated_targets_2d_input_and_other_blank():
    log_probs = _ctc_log_probs(np.float32)
    flat = np.concatenate([row[:n] for row, n in zip(CTC_TARGETS, CTC_TARGET_LENGTHS,
                                                     strict=True)]).astype(np.int32)
    nll, _ = openacl.ops.ctc_loss(_dev(log_probs), _dev(flat), CTC_INPUT_LENGTHS,
                                  CTC_TARGET_LENGTHS, 0, False)
    golden, _ = torch.ops.aten._ctc_loss(_wide(log_probs), torch.from_numpy(flat).long(),
                                         CTC_INPUT_LENGTHS, CTC_TARGET_LENGTHS, 0, False)
    assert_close(nll.numpy(), _rounded(golden, np.float32), "concatenated")
    single = log_probs[:, 0]
    labels = np.array([1.0, 2.0, 2.0, 4.0], np.float32)  # CANN takes float labels too
    one, alpha = openacl.ops.ctc_loss(_dev(single), _dev(labels), [8], [4], 3, False)
    golden_one, _ = torch.ops.aten._ctc_loss(_wide(single)[:, None], torch.tensor([[1, 2, 2, 4]]),
                                             [8], [4], 3, False)
    assert one.numpy().shape == () and alpha.numpy().shape == (1, 8, 9)
    assert_close(one.numpy(), _rounded(golden_one[0], np.float32), "2-d input, blank 3")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_backward_matches_autograd(dtype, zero_infinity):
    log_probs = _ctc_log_probs(dtype)
    lengths = list(CTC_INPUT_LENGTHS)
    lengths[2] = 2
    grad = random_array((4,), dtype, np.random.default_rng(31), -2, 2)
    wide = _wide(log_probs).requires_grad_()
    nll, alpha = torch.ops.aten._ctc_loss(wide, torch.from_numpy(CTC_TARGETS), lengths,
                                          CTC_TARGET_LENGTHS, 0, zero_infinity)
    nll.backward(_wide(grad))
    padded = torch.cat([alpha.detach(), torch.full((4, 8, 7), -np.inf, dtype=torch.float64)], 2)
    ours = openacl.ops.ctc_loss_backward(
        _dev(grad), _dev(log_probs), _dev(CTC_TARGETS), lengths, CTC_TARGET_LENGTHS,
        _dev(_rounded(nll, dtype)), _dev(_rounded(padded, dtype)), 0, zero_infinity).numpy()
    golden = wide.grad if zero_infinity else torch.where(
        torch.isfinite(wide.grad), wide.grad, torch.zeros_like(wide.grad))
    if not zero_infinity:  # the impossible sequence's gradient is NaN in both
        ours = np.where(np.isfinite(ours), ours, 0)
    assert_close(ours, _rounded(golden, dtype), "ctc backward")


def test_ctc_loss_bad_arguments_refused():
    log_probs = _dev(_ctc_log_probs(np.float32))
    targets = _dev(CTC_TARGETS)
    _fails(lambda: openacl.ops.ctc_loss(log_probs, targets, [8, 6, 7], CTC_TARGET_LENGTHS),
           argument="inputLengths")
    _fails(lambda: openacl.ops.ctc_loss(log_probs, targets, [9, 6, 7, 3], CTC_TARGET_LENGTHS),
           argument="inputLengths")
    _fails(lambda: openacl.ops.ctc_loss(log_probs, targets, CTC_INPUT_LENGTHS, [5, 2, 3, 0]),
           argument="targets")
    _fails(lambda: openacl.ops.ctc_loss(log_probs, targets, CTC_INPUT_LENGTHS,
                                        CTC_TARGET_LENGTHS, 5), argument="blank")
    _fails(lambda: openacl.ops.ctc_loss(_dev(np.zeros((8, 4, 5), np.int32)), targets,
                                        CTC_INPUT_LENGTHS, CTC_TARGET_LENGTHS),
           argument="logProbs")
    out, alpha = openacl.empty((4,), np.float32), openacl.empty((4, 8, 9), np.float32)
    bad = _dev(np.array([[1, 2, 2, 9], [3, 1, 0, 0], [4, 4, 4, 0], [2, 0, 0, 0]]))
    _fails_in_kernel("ctc_loss", log_probs, bad, CTC_INPUT_LENGTHS, CTC_TARGET_LENGTHS, 0, False,
                     out, alpha, match="argument 'targets' holds index 9")


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_losses_and_backward_of_0_dim_tensors(name):
    attributes, reference, _, _ = POINTWISE[name]
    x, y, grad = np.float32(0.75), np.float32(0.25), np.float32(2.0)
    for reduction in (0, 1):
        ours = getattr(openacl.ops, name)(_dev(x), _dev(y), reduction, *attributes).numpy()
        golden = reference(_wide(x), _wide(y), REDUCTIONS[reduction])
        assert_close(ours, _rounded(golden, np.float32), f"{name} 0-dim")
    backward = f"{name}_backward"
    if hasattr(aclnn, f"{backward}_get_workspace_size"):
        ours = getattr(openacl.ops, backward)(_dev(grad), _dev(x), _dev(y), 1,
                                              *attributes).numpy()
        golden = _autograd(lambda a, b: reference(a, b, "mean"), _wide(grad), _wide(x),
                           _wide(y))
        assert_close(ours, _rounded(golden, np.float32), f"{backward} 0-dim")


def test_multilabel_margin_loss_skips_a_nan_margin_as_torch():
    """inf - inf margins are NaN: torch's loop counts only margins > 0, so the loss of an
    all-inf row is 0, not NaN (CANN's ATK cases hold such rows)."""
    x = np.full((1, 7), np.inf, np.float32)
    target = np.array([[5, 1, 0, 4, 5, 0, 1]], np.int64)
    loss, _ = openacl.ops.multilabel_margin_loss(_dev(x), _dev(target), 0)
    golden, _ = torch.ops.aten.multilabel_margin_loss_forward(
        torch.from_numpy(x), torch.from_numpy(target), 0)
    np.testing.assert_array_equal(loss.numpy(), golden.numpy())
