"""Optimizer steps (ops/optim.py) against torch.optim.AdamW in float64, FusedEmaAdam,
ApplyAdamWQuant and AdvanceStep(V2) against their documents' formulas, and Modulate
(ops/vector_fusion.py) against torch; their argument checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, assert_close
from openacl import ops
from openacl.errors import (
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    AclError,
)

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _state(shape, dtype):
    w, m = RNG.normal(size=shape), RNG.normal(size=shape)
    v = np.abs(RNG.normal(size=shape))
    return [a.astype(dtype) for a in (w, m, v, v * 1.5)], RNG.normal(size=shape).astype(dtype)


def _torch_adamw(w, m, v, max_v, g, step, lr, betas, weight_decay, eps, amsgrad, maximize):
    wide = [torch.from_numpy(a.astype(np.float64)) for a in (w, m, v, max_v, g)]
    param = torch.nn.Parameter(wide[0].clone())
    opt = torch.optim.AdamW([param], lr=lr, betas=betas, weight_decay=weight_decay, eps=eps,
                            amsgrad=amsgrad, maximize=maximize)
    param.grad = wide[4]
    opt.state[param] = {"step": torch.tensor(float(step - 1)), "exp_avg": wide[1].clone(),
                        "exp_avg_sq": wide[2].clone()}
    if amsgrad:
        opt.state[param]["max_exp_avg_sq"] = wide[3].clone()
    opt.step()
    state = opt.state[param]
    return (param.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy(),
            state["max_exp_avg_sq"].numpy() if amsgrad else max_v.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, False), (False, True)])
def test_apply_adam_w_v2_is_torch_adamw(dtype, amsgrad, maximize):
    (w, m, v, max_v), g = _state((6, 9), dtype)
    refs = [openacl.to_device(a.copy()) for a in (w, m, v, max_v)]
    ops.apply_adam_wv2(*refs, grad=g, step=np.array([4], np.int64), lr=0.01, beta1=0.9,
                       beta2=0.99, weightDecay=0.05, eps=1e-6, amsgrad=amsgrad,
                       maximize=maximize)
    golden = _torch_adamw(w, m, v, max_v, g, 4, 0.01, (0.9, 0.99), 0.05, 1e-6, amsgrad,
                          maximize)
    for ref, expected, name in zip(refs, golden, ("var", "m", "v", "max_v"), strict=True):
        assert_close(ref.numpy(), expected.astype(dtype), name)
        ref.free()


def test_apply_adam_w_v2_takes_a_dtype_per_tensor():
    """CANN's host code checks each tensor against the float list on its own and computes
    in float32 when they differ (its ATK cases pass bfloat16 maxGradNorm beside float32
    state); each result is rounded into its own tensor's dtype."""
    (w, m, v, max_v), g = _state((6, 9), np.float32)
    kinds = (np.float32, BF16, np.float32, np.float16)
    refs = [openacl.to_device(a.astype(k)) for a, k in zip((w, m, v, max_v), kinds,
                                                          strict=True)]
    grad = g.astype(BF16)
    ops.apply_adam_wv2(*refs, grad=grad, step=np.array([4], np.int64), lr=0.01, beta1=0.9,
                       beta2=0.99, weightDecay=0.05, eps=1e-6, amsgrad=True)
    golden = _torch_adamw(*(a.astype(k) for a, k in zip((w, m, v, max_v), kinds,
                                                       strict=True)),
                          grad, 4, 0.01, (0.9, 0.99), 0.05, 1e-6, True, False)
    for ref, expected, kind, name in zip(refs, golden, kinds, ("var", "m", "v", "max_v"),
                                         strict=True):
        assert ref.numpy().dtype == np.dtype(kind), name
        assert_close(ref.numpy(), expected.astype(kind), name)
        ref.free()
    refs = [openacl.to_device(a) for a in (w, m, v, max_v)]
    with pytest.raises(AclError) as info:
        ops.apply_adam_wv2(*refs, grad=g.astype(np.int32), step=np.array([4], np.int64))
    for ref in refs:
        ref.free()
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "grad" in str(info.value)


def test_apply_adam_w_takes_its_hyper_parameters_as_tensors():
    (w, m, v, max_v), g = _state((5, 4), np.float32)
    refs = [openacl.to_device(a.copy()) for a in (w, m, v)]
    one = {name: np.array([value], np.float32) for name, value in (
        ("beta1Power", 0.9 ** 2), ("beta2Power", 0.99 ** 2), ("lr", 0.01),
        ("weightDecay", 0.05), ("beta1", 0.9), ("beta2", 0.99), ("eps", 1e-6))}
    ops.apply_adam_w(*refs, **one, grad=g, maxGradNormOptional=max_v, amsgrad=True)
    var, m2, v2, max2 = _torch_adamw(w, m, v, max_v, g, 3, 0.01, (0.9, 0.99), 0.05, 1e-6,
                                     True, False)
    assert_close(refs[0].numpy(), var.astype(np.float32), "var")
    assert_close(refs[1].numpy(), m2.astype(np.float32), "m")
    assert_close(refs[2].numpy(), max2.astype(np.float32), "v holds the running maximum")
    for ref in refs:
        ref.free()


@pytest.mark.parametrize("mode,bias_correction", [(0, True), (1, True), (1, False)])
def test_apply_fused_ema_adam_follows_its_formulas(mode, bias_correction):
    shape = (8, 5)
    grad, var, m, s = (RNG.normal(size=shape) for _ in range(4))
    v = np.abs(RNG.normal(size=shape))
    refs = [openacl.to_device(a.astype(np.float32)) for a in (var, m, v, s)]
    ops.apply_fused_ema_adam(grad.astype(np.float32), *refs, np.array([3], np.int64), 1e-3,
                             0.99, 0.9, 0.999, 1e-8, mode, bias_correction, 0.01)
    g = grad.astype(np.float32).astype(np.float64)
    var, m, v, s = (a.astype(np.float32).astype(np.float64) for a in (var, m, v, s))
    c1, c2 = (1 - 0.9 ** 3, 1 - 0.999 ** 3) if bias_correction else (1, 1)
    if mode == 0:
        g = g + 0.01 * var
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    update = (m / c1) / (np.sqrt(v / c2) + 1e-8) + (0.01 * var if mode == 1 else 0)
    var = var - 1e-3 * update
    s = 0.99 * s + 0.01 * var
    for ref, expected in zip(refs, (var, m, v, s), strict=True):
        assert_close(ref.numpy(), expected.astype(np.float32))
        ref.free()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("two_d", [False, True])
def test_modulate(dtype, two_d):
    x = RNG.normal(size=(2, 5, 8)).astype(dtype)
    shape = (2, 8) if two_d else (2, 1, 8)
    scale, shift = (RNG.normal(size=shape).astype(dtype) for _ in range(2))
    out = ops.modulate(x, scale, shift).numpy()
    wide = [torch.from_numpy(a.astype(np.float64)) for a in (x, scale, shift)]
    golden = wide[0] * (1 + wide[1].reshape(2, 1, 8)) + wide[2].reshape(2, 1, 8)
    assert_close(out, golden.numpy().astype(dtype))
    only_shift = ops.modulate(x, None, shift).numpy()
    assert_close(only_shift, (wide[0] + wide[2].reshape(2, 1, 8)).numpy().astype(dtype))


@pytest.mark.parametrize("call,name", [
    (lambda: ops.modulate(np.ones((2, 3), np.float32), None, None), "self"),
    (lambda: ops.modulate(np.ones((2, 3, 4), np.float32), np.ones((3, 4), np.float32), None),
     "scaleOptional"),
])
def test_bad_arguments_are_refused_naming_them(call, name):
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in info.value.message


def test_bad_optimizer_arguments_are_refused_naming_them():
    refs = [openacl.to_device(np.ones(4, np.float32)) for _ in range(4)]
    try:
        with pytest.raises(AclError) as info:
            ops.apply_fused_ema_adam(np.ones(4, np.float32), *refs, np.array([1], np.int64),
                                     mode=2)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'mode'" in info.value.message
        with pytest.raises(AclError) as info:
            ops.apply_adam_wv2(*refs[:3], None, grad=np.ones(5, np.float32),
                               step=np.array([1], np.int64))
        assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'grad'" in info.value.message
        with pytest.raises(AclError) as info:  # amsgrad needs the running maximum
            ops.apply_adam_wv2(*refs[:3], None, grad=np.ones(4, np.float32),
                               step=np.array([1], np.int64), amsgrad=True)
        assert "maxGradNormOptionalRef" in info.value.message
    finally:
        for ref in refs:
            ref.free()


QMAP_M = np.linspace(-1, 1, 256).astype(np.float32)  # CANN's ATK maps: signed for m
QMAP_V = np.linspace(0, 1, 256).astype(np.float32)  # and unsigned for v


def _nearest(values, qmap, signed):
    """The reference codes: the nearest map entry (the lower of two as near), for a signed
    map the next one towards the value when the nearest has the other sign."""
    codes = np.argmin(np.abs(values[:, None] - qmap[None, :].astype(np.float64)), axis=1)
    if signed:
        flip = values * qmap[codes] < 0
        codes = np.clip(codes + (flip & (values > 0)) - (flip & (values < 0)), 0, 255)
    return codes


def _adam_w_quant_reference(var, grad, m, v, absmax_m, absmax_v, step, lr, beta1, beta2,
                            weight_decay, eps, gnorm_scale):
    """The aclnn document's AdamW on dequantized moments, in float64, with t = step + 1."""
    size, block = var.size, 256
    wide = [a.astype(np.float64).reshape(-1) for a in (var, grad)]
    per_element = [np.repeat(a.astype(np.float64), block)[:size] for a in (absmax_m, absmax_v)]
    first = QMAP_M.astype(np.float64)[m.reshape(-1)] * per_element[0]
    second = QMAP_V.astype(np.float64)[v.reshape(-1)] * per_element[1]
    g = wide[1] * gnorm_scale
    first = beta1 * first + (1 - beta1) * g
    second = beta2 * second + (1 - beta2) * g * g
    t = step + 1
    c1, c2 = 1 - beta1 ** t, 1 - beta2 ** t
    w = wide[0] - lr * (first / c1) / (np.sqrt(second / c2) + eps)
    if weight_decay > 0:
        w = w * (1 - lr * weight_decay)
    blocks = -(-size // block)
    new_m = np.array([np.abs(first[i * block:(i + 1) * block]).max() for i in range(blocks)])
    new_v = np.array([second[i * block:(i + 1) * block].max() for i in range(blocks)])
    codes_m = _nearest(first / np.repeat(new_m, block)[:size], QMAP_M, True)
    codes_v = _nearest(second / np.repeat(new_v, block)[:size], QMAP_V, False)
    return w, codes_m, codes_v, new_m, new_v


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("weight_decay", [0.01, 0.0])
def test_apply_adam_w_quant_follows_its_formulas(dtype, weight_decay):
    shape = (3, 200)  # 600 elements: blocks of 256, 256 and 88
    var, grad = (RNG.normal(size=shape).astype(dtype) for _ in range(2))
    m, v = (RNG.integers(0, 256, size=shape, dtype=np.uint8) for _ in range(2))
    absmax_m, absmax_v = (RNG.uniform(0.1, 2, size=3).astype(np.float32) for _ in range(2))
    refs = [openacl.to_device(a.copy()) for a in (var, m, v, absmax_m, absmax_v)]
    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.99, weightDecay=weight_decay, eps=1e-6,
                 gnormScale=0.5)
    ops.apply_adam_w_quant(refs[0], grad, refs[1], refs[2], QMAP_M, QMAP_V, refs[3], refs[4],
                           np.array([4], np.int64), **hyper, quantModeOptional="BLOCKWISE",
                           blockSize=256)
    golden = _adam_w_quant_reference(var, grad, m, v, absmax_m, absmax_v, 4, 0.01, 0.9, 0.99,
                                     weight_decay, 1e-6, 0.5)
    got = [ref.numpy() for ref in refs]
    assert_close(got[0], golden[0].reshape(shape).astype(dtype), "var")
    for codes, expected, name in ((got[1], golden[1], "m"), (got[2], golden[2], "v")):
        off = np.abs(codes.reshape(-1).astype(np.int64) - expected)
        # float32 against float64: a value at the middle of two entries may go either way
        assert off.max() <= 1 and (off == 0).mean() > 0.99, name
    assert_close(got[3], golden[3].astype(np.float32), "absmaxM")
    assert_close(got[4], golden[4].astype(np.float32), "absmaxV")
    for ref in refs:
        ref.free()


def test_apply_adam_w_quant_keeps_the_sign_of_m():
    """A small positive m whose nearest signed entry is negative gets the next code up."""
    qmap = np.array([-1.0] + [-0.01] + list(np.linspace(0.5, 1, 254)), np.float32)
    var = np.zeros(256, np.float32)
    grad = np.full(256, 1e-3, np.float32)
    grad[0] = 1.0  # the block's absmax: m[0] normalizes to 1, the others to 1e-3
    refs = [openacl.to_device(a) for a in (var, np.zeros(256, np.uint8),
                                           np.zeros(256, np.uint8), np.ones(1, np.float32),
                                           np.ones(1, np.float32))]
    ops.apply_adam_w_quant(refs[0], grad, refs[1], refs[2], qmap, QMAP_V, refs[3], refs[4],
                           np.array([1], np.int64), beta1=0.0, weightDecay=0.0)
    codes = refs[1].numpy()
    assert codes[0] == 255 and (codes[1:] == 2).all()  # nearest -0.01 (code 1) -> code 2
    for ref in refs:
        ref.free()


def _advance_step_reference(tokens, sampled, positions, seq_lens, slots, tables, num_seqs,
                            num_queries, block_size):
    tokens, positions, seq_lens, slots = (a.copy() for a in (tokens, positions, seq_lens, slots))
    for i in range(num_seqs):
        if i >= num_queries:
            tokens[i], positions[i], slots[i] = 0, 0, -1
            continue
        tokens[i], positions[i] = sampled[i, 0], seq_lens[i]
        slots[i] = tables[i, seq_lens[i] // block_size] * block_size + seq_lens[i] % block_size
        seq_lens[i] += 1
    return tokens, positions, seq_lens, slots


def test_advance_step_is_vllms_decode_bookkeeping():
    num_seqs, num_queries, block_size = 7, 5, 4
    seq_lens = RNG.integers(1, 30, size=num_seqs)
    state = [RNG.integers(1, 50, size=num_seqs) for _ in range(3)]
    sampled = RNG.integers(1, 1000, size=(num_queries, 1))
    tables = RNG.integers(0, 100, size=(num_seqs, 8))
    refs = [openacl.to_device(a.astype(np.int64)) for a in (state[0], state[1], seq_lens,
                                                            state[2])]
    ops.advance_step(refs[0], sampled, refs[1], refs[2], refs[3], tables, num_seqs,
                     num_queries, block_size)
    golden = _advance_step_reference(state[0], sampled, state[1], seq_lens, state[2], tables,
                                     num_seqs, num_queries, block_size)
    for ref, expected, name in zip(refs, golden, ("tokens", "positions", "seqLens", "slots"),
                                   strict=True):
        np.testing.assert_array_equal(ref.numpy(), expected, name)
        ref.free()


@pytest.mark.parametrize("spec_num", [0, 2])
def test_advance_step_v2_advances_speculative_tokens(spec_num):
    num_seqs, block_size, per_seq = 4, 8, 1 + spec_num
    flat = num_seqs * per_seq
    sampled = RNG.integers(1, 1000, size=(num_seqs, per_seq))
    if spec_num:
        sampled[1, 1:] = -1  # one accepted sample: the first
        sampled[2, 0] = -1  # the first rejected: the last column (vLLM's index -1)
    spec_token = RNG.integers(1, 1000, size=(num_seqs, spec_num))
    accepted = RNG.integers(0, per_seq, size=num_seqs)
    positions = RNG.integers(0, 60, size=flat)
    tables = RNG.integers(0, 100, size=(num_seqs, 12))
    state = [RNG.integers(1, 50, size=flat) for _ in range(3)]
    refs = [openacl.to_device(a.astype(np.int64)) for a in (state[0], positions, state[1],
                                                            state[2])]
    ops.advance_step_v2(refs[0], sampled, refs[1], refs[2], refs[3], tables, spec_token,
                        accepted, num_seqs, num_seqs, block_size)
    new_positions = positions + np.repeat(accepted, per_seq) + 1
    rows = np.repeat(np.arange(num_seqs), per_seq)
    tokens = np.empty((num_seqs, per_seq), np.int64)
    for i, row in enumerate(sampled.tolist()):
        tokens[i, 0] = row[row.index(-1) - 1] if -1 in row else row[-1]
    tokens[:, 1:] = spec_token
    golden = (tokens.reshape(-1), new_positions, new_positions + 1,
              tables[rows, new_positions // block_size] * block_size
              + new_positions % block_size)
    for ref, expected in zip(refs, golden, strict=True):
        np.testing.assert_array_equal(ref.numpy(), expected)
        ref.free()


IN_PLACE = frozenset({"varRef", "mRef", "vRef", "absmaxMRef", "absmaxVRef", "inputTokens",
                      "inputPositions", "seqLens", "slotMapping"})  # device tensors


def _quant_args(**change):
    """ApplyAdamWQuant's arguments for 300 elements (two blocks), with ``change``."""
    args = dict(varRef=np.zeros(300, np.float32), grad=np.zeros(300, np.float32),
                mRef=np.zeros(300, np.uint8), vRef=np.zeros(300, np.uint8), qmapM=QMAP_M,
                qmapV=QMAP_V, absmaxMRef=np.ones(2, np.float32),
                absmaxVRef=np.ones(2, np.float32), step=np.array([1], np.int64))
    args.update(change)
    return args


def _step_args(**change):
    """AdvanceStep's arguments for 4 sequences, 2 queries, with ``change``."""
    args = dict(inputTokens=np.zeros(4, np.int64), sampledTokenIds=np.ones((2, 1), np.int64),
                inputPositions=np.zeros(4, np.int64), seqLens=np.ones(4, np.int64),
                slotMapping=np.zeros(4, np.int64), blockTables=np.zeros((4, 2), np.int64),
                numSeqs=4, numQueries=2, blockSize=4)
    args.update(change)
    return args


def _step_v2_args(**change):
    """AdvanceStepV2's arguments for 2 sequences of 1 + 1 tokens, with ``change``."""
    args = dict(inputTokens=np.zeros(4, np.int64), sampledTokenIds=np.ones((2, 2), np.int64),
                inputPositions=np.zeros(4, np.int64), seqLens=np.ones(4, np.int64),
                slotMapping=np.zeros(4, np.int64), blockTables=np.zeros((2, 2), np.int64),
                specToken=np.ones((2, 1), np.int64), acceptedNum=np.zeros(2, np.int64),
                numSeqs=2, numQueries=2, blockSize=4)
    args.update(change)
    return args


@pytest.mark.parametrize("op,args,name,code", [
    (ops.apply_adam_w_quant, _quant_args(grad=None), "grad", ACLNN_ERR_PARAM_NULLPTR),
    (ops.apply_adam_w_quant, _quant_args(qmapM=None), "qmapM", ACLNN_ERR_PARAM_NULLPTR),
    (ops.apply_adam_w_quant, _quant_args(absmaxVRef=None), "absmaxVRef",
     ACLNN_ERR_PARAM_NULLPTR),
    (ops.apply_adam_w_quant, _quant_args(varRef=np.zeros(300, np.float64),
                                         grad=np.zeros(300, np.float64)), "varRef",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(grad=np.zeros(300, np.float16)), "grad",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(mRef=np.zeros(300, np.int8)), "mRef",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(vRef=np.zeros(299, np.uint8)), "vRef",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(qmapV=np.zeros(255, np.float32)), "qmapV",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(absmaxMRef=np.ones(1, np.float32)), "absmaxMRef",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(step=np.array([1], np.int32)), "step",
     ACLNN_ERR_PARAM_INVALID),
    (ops.apply_adam_w_quant, _quant_args(blockSize=128), "blockSize",
     ACLNN_ERR_INNER_TILING_ERROR),
    (ops.advance_step, _step_args(seqLens=None), "seqLens", ACLNN_ERR_PARAM_NULLPTR),
    (ops.advance_step, _step_args(blockTables=np.zeros((4, 2), np.int32)), "blockTables",
     ACLNN_ERR_PARAM_INVALID),
    (ops.advance_step, _step_args(slotMapping=np.zeros(3, np.int64)), "slotMapping",
     ACLNN_ERR_INNER_TILING_ERROR),
    (ops.advance_step, _step_args(sampledTokenIds=np.ones((2, 2), np.int64)),
     "sampledTokenIds", ACLNN_ERR_INNER_TILING_ERROR),
    (ops.advance_step, _step_args(numQueries=4), "numSeqs", ACLNN_ERR_INNER_TILING_ERROR),
    (ops.advance_step, _step_args(blockSize=0), "blockSize", ACLNN_ERR_INNER_TILING_ERROR),
    (ops.advance_step_v2, _step_v2_args(acceptedNum=None), "acceptedNum",
     ACLNN_ERR_PARAM_NULLPTR),
    (ops.advance_step_v2, _step_v2_args(specToken=np.ones((2, 1), np.float32)), "specToken",
     ACLNN_ERR_PARAM_INVALID),
    (ops.advance_step_v2, _step_v2_args(inputTokens=np.zeros(2, np.int64)), "inputTokens",
     ACLNN_ERR_INNER_TILING_ERROR),
    (ops.advance_step_v2, _step_v2_args(numQueries=1), "numQueries",
     ACLNN_ERR_INNER_TILING_ERROR),
])
def test_bad_quant_and_step_arguments_are_refused_naming_them(op, args, name, code):
    on_device = {key: openacl.to_device(value) for key, value in args.items()
                 if key in IN_PLACE and value is not None}
    try:
        with pytest.raises(AclError) as info:
            op(**{**args, **on_device})
        assert info.value.code == code and f"'{name}'" in info.value.message
    finally:
        for ref in on_device.values():
            ref.free()
